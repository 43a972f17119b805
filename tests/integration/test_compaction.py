"""Log compaction on a running broker: user topics with every codec, and __consumer_offsets."""
from __future__ import annotations

import os
import time
from functools import partial
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KPTopicPartition

from tests.harness import BrokerProcess
from tests.polling import read_until

from .clients import CODECS, create_topic

pytestmark = pytest.mark.timeout(180)

KEYS = 20
ROUNDS = 8


def read_all(bs: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the start to the current end, as (offset, key, value)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return out
                continue
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError(f"could not read {topic} to its end")
    finally:
        c.close()


def read_rounds(bs: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """read_all without the fillers write_rounds adds."""
    return [r for r in read_all(bs, topic) if not r[1].startswith(b"filler")]


def write_rounds(bs: str, topic: str, codec: str) -> dict[bytes, bytes | None]:
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 50})
    last: dict[bytes, bytes | None] = {}
    for r in range(ROUNDS):
        for k in range(KEYS):
            key, value = f"k{k}".encode(), f"round{r}-key{k}".encode()
            if r == ROUNDS - 1 and k == 0:
                value = None  # a tombstone: kept (delete.retention.ms is a day)
            p.produce(topic, key=key, value=value, partition=0)
            last[key] = value
        assert p.flush(30) == 0  # one batch per round
    # Incompressible fillers with unique keys roll the active segment, so every round
    # ends up in a closed one.
    for i in range(3):
        p.produce(topic, key=f"filler{i}".encode(), value=os.urandom(700), partition=0)
        assert p.flush(30) == 0
    return last


@pytest.fixture
def cbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config={"log.cleaner.backoff.ms": 200})


def test_compacted_topic_keeps_last_value_per_key_with_every_codec(cbroker: BrokerProcess
                                                                    ) -> None:
    bs = cbroker.bootstrap
    config = {"cleanup.policy": "compact", "segment.bytes": "1024",
              "min.cleanable.dirty.ratio": "0.01"}
    for codec in CODECS:
        create_topic(bs, f"cmp-{codec}", 1, config)
    expected = {c: write_rounds(bs, f"cmp-{c}", c) for c in CODECS}
    for codec in CODECS:
        topic = f"cmp-{codec}"
        records = read_until(partial(read_rounds, bs, topic), lambda rs: len(rs) == KEYS, 30, 0.3)
        assert len(records) == KEYS, f"{codec}: {len(records)} records left after cleaning"
        assert {k: v for _, k, v in records} == expected[codec]
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(offsets)
        assert offsets[-1] == ROUNDS * KEYS - 1  # offsets are kept (gaps, not renumbering)
    # Another client library reads the compacted (gapped, re-encoded) batches too.
    kc = KafkaConsumer(bootstrap_servers=bs, consumer_timeout_ms=3000,
                       auto_offset_reset="earliest", enable_auto_commit=False)
    kc.assign([KPTopicPartition("cmp-zstd", 0)])
    got = {m.key: m.value for m in kc if not m.key.startswith(b"filler")}
    kc.close()
    assert got == expected["zstd"]


def test_consumer_offsets_is_compacted_and_reloads(broker_factory: Callable[..., BrokerProcess]
                                                   ) -> None:
    broker = broker_factory(config={"log.cleaner.backoff.ms": 200,
                                    "offsets.topic.num.partitions": 1,
                                    "offsets.topic.segment.bytes": 2048})
    bs = broker.bootstrap
    create_topic(bs, "busy", 1)  # its admin client is dropped on return: no idle connection
    # is left to hold up the broker's stop below
    c = Consumer({"bootstrap.servers": bs, "group.id": "committer",
                  "enable.auto.commit": False})
    for i in range(1, 151):
        c.commit(offsets=[TopicPartition("busy", 0, i)], asynchronous=False)
    c.close()
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    records = read_until(partial(read_all, bs, "__consumer_offsets"), lambda rs: len(rs) < 40,
                         30, 0.3)
    assert len(records) < 40, f"{len(records)} records: __consumer_offsets was not compacted"
    assert len(list(offsets_dir.glob("*.log"))) > 1
    broker.restart()
    check = Consumer({"bootstrap.servers": bs, "group.id": "committer"})
    try:
        [tp] = check.committed([TopicPartition("busy", 0)], timeout=10)
        assert tp.offset == 150
    finally:
        check.close()


def test_kill_during_cleaning_loses_nothing(broker_factory: Callable[..., BrokerProcess]
                                            ) -> None:
    """SIGKILL at several moments of a cleaning pass: every key keeps its latest value."""
    broker = broker_factory(config={"log.cleaner.enable": "false"})
    bs = broker.bootstrap
    expected = fill_crashy(bs)
    broker.stop()
    for delay in (0.1, 0.45):
        # A run that cleans, killed `delay` s after it listens ...
        broker.config.update({"log.cleaner.enable": "true", "log.cleaner.backoff.ms": 100})
        broker.start()
        time.sleep(delay)
        broker.kill()
        # ... then a run that only checks (no cleaning), from the state the kill left.
        broker.config["log.cleaner.enable"] = "false"
        broker.start()
        records = read_all(bs, "crashy")
        latest = {k: v for _, k, v in records}
        assert latest.keys() == expected.keys(), f"keys lost after a kill at {delay}s"
        assert all(latest[k] == v for k, v in expected.items() if k != b"zz-roll")
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(set(offsets)), "offsets must stay unique and ordered"
        broker.stop()
    broker.config["log.cleaner.enable"] = "true"
    broker.start()
    records = read_until(partial(read_all, bs, "crashy"), lambda rs: len(rs) <= len(expected),
                         30, 0.3)
    assert len(records) == len(expected), \
        f"cleaning after the kills left {len(records)} records for {len(expected)} keys"


def fill_crashy(bs: str) -> dict[bytes, bytes]:
    """20000 lz4 records over 300 keys in ~7 closed segments, then a segment roll."""
    create_topic(bs, "crashy", 1, {"cleanup.policy": "compact", "segment.bytes": "65536",
                                   "min.cleanable.dirty.ratio": "0.01"})
    failed: list[object] = []
    p = Producer({"bootstrap.servers": bs, "compression.type": "lz4", "linger.ms": 20,
                  "batch.size": 16384,
                  "on_delivery": lambda err, msg: failed.append(err) if err else None})
    expected: dict[bytes, bytes] = {}
    for i in range(20000):
        key, value = f"key{i % 300}".encode(), f"value-{i}-".encode() * 4
        p.produce("crashy", key=key, value=value, partition=0)
        expected[key] = value
    assert p.flush(60) == 0
    p.produce("crashy", key=b"zz-roll", value=os.urandom(60000), partition=0)
    assert p.flush(30) == 0 and not failed
    expected[b"zz-roll"] = b""
    return expected
