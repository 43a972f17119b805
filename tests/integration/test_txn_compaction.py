"""Compaction of a compacted topic holding committed and aborted transactions, on a running
broker written by confluent-kafka's transactional producer: the cleaner removes the aborted
transaction's records and the superseded committed ones, the markers of transactions left
without data go once delete.retention.ms passed, the marker of a transaction with data stays,
and read_committed and read_uncommitted readers both see exactly the committed values.
"""
from __future__ import annotations

import os
import uuid
from typing import Callable

import pytest
from confluent_kafka import Producer

from rillet.records import decode_records, parse_batches
from tests.harness import BrokerProcess
from tests.polling import read_until

from ..wire import Wire
from .clients import create_topic
from .test_txn_coordinator import consume_all, transaction, txn_producer

pytestmark = pytest.mark.timeout(180)
WAIT_S = 60.0
RETENTION_MS = 2000


def log_contents(bootstrap: str, topic: str) -> tuple[list[bytes], int]:
    """(every data record's value, the number of transaction markers) of partition 0, read
    uncommitted from the log start to the high watermark with raw fetches."""
    values: list[bytes] = []
    markers = 0
    offset = 0
    with Wire(bootstrap) as w:
        while True:
            resp = w.request(1, 12, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, part
            data = bytearray(part.records or b"")
            headers = parse_batches(data)
            if not headers:
                return values, markers
            for h in headers:
                batch = data[h.position:h.position + h.size]
                if h.is_control:
                    markers += 1
                else:
                    values += [r.value for r in decode_records(batch)[1] if r.value is not None]
                offset = h.last_offset + 1
            if offset >= part.high_watermark:
                return values, markers


@pytest.fixture
def cbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config={"log.cleaner.backoff.ms": 200,
                                  "transaction.state.log.num.partitions": 1,
                                  "offsets.topic.num.partitions": 1,
                                  "group.initial.rebalance.delay.ms": 0})


def test_compaction_removes_aborted_data_and_emptied_transactions_markers(
        cbroker: BrokerProcess) -> None:
    bs = cbroker.bootstrap
    topic = f"txcomp-{uuid.uuid4().hex[:6]}"
    create_topic(bs, topic, partitions=1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(RETENTION_MS)})
    producer = txn_producer(bs, f"tx-{topic}")
    keys = [f"k{i}" for i in range(5)]

    def write(values: list[str], commit: bool) -> None:
        producer.begin_transaction()
        for key, value in zip(keys, values):
            producer.produce(topic, value.encode(), key=key.encode(), partition=0)
        producer.flush(WAIT_S)
        (producer.commit_transaction if commit else producer.abort_transaction)(WAIT_S)

    write([f"old-{k}" for k in keys], commit=True)       # superseded below
    write([f"aborted-{k}" for k in keys], commit=False)
    write([f"new-{k}" for k in keys], commit=True)       # the values that stay
    # Incompressible fillers with unique keys roll the segments past the markers.
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(4):
        plain.produce(topic, os.urandom(350).hex().encode(), key=f"filler{i}".encode(), partition=0)
        assert plain.flush(WAIT_S) == 0
    expected = sorted(f"new-{k}".encode() for k in keys)

    def txn_values() -> list[bytes]:
        return sorted(v for v in log_contents(bs, topic)[0] if not len(v) == 700)
    # The cleaner removes the aborted and the superseded records...
    assert read_until(txn_values, lambda vs: vs == expected, WAIT_S) == expected
    # ...and, delete.retention.ms later, the two markers of the emptied transactions.
    _, markers = read_until(lambda: log_contents(bs, topic), lambda c: c[1] == 1, WAIT_S)
    assert markers == 1
    committed = consume_all(bs, topic, "read_committed", 9)
    uncommitted = consume_all(bs, topic, "read_uncommitted", 9)
    for seen in (committed, uncommitted):
        assert sorted(v for v in seen if v.startswith("new-")) == [
            e.decode() for e in expected]
        assert not [v for v in seen if v.startswith(("old-", "aborted-"))]
    # The producer goes on: later transactions commit and abort as before.
    transaction(producer, topic, ["after"], partition=0)
    transaction(producer, topic, ["after-aborted"], commit=False, partition=0)
    assert "after" in consume_all(bs, topic, "read_committed", 10)
