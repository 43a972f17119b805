"""The log side of transactions with real broker processes and real consumers.

These tests play the transaction coordinator's part (its own tests are in
test_txn_coordinator.py): transactional batches are hand-built (records.encode_batch) for a producer id from InitProducerId (the idempotent
path) and sent with Produce and a transactional id; WriteTxnMarkers then commits or aborts
them, as a coordinator would. read_committed consumers (confluent-kafka, kafka-python,
aiokafka, the Java console consumer) must see only committed records and stop at the last
stable offset (LSO); read_uncommitted sees everything; a restart, a kill -9 and a leader
change keep open transactions and aborts. No coordinator knows these transactions, so the
brokers run with transaction.partition.verification.enable=false (KIP-890's verification
would refuse them, as Kafka's would; test_txn_verification.py tests it).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from rillet.records import Record, encode_batch
from tests.harness import BrokerProcess
from tests.integration.java_tools import KafkaTools, fetch_kafka_jars
from tests.polling import read_until, wait_until

from ..wire import Wire
from .clients import create_topic

TXN_ID = "txn-test"
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TXN_ID_AUTH_FAILED = 47, 48, 53
INVALID_RECORD, NOT_LEADER = 87, 6
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
# The coordinator's part is played here: the leaders may not ask one (see the module doc).
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config=UNVERIFIED)


@dataclass
class TxnProducer:
    """A producer id with hand-built batches: what a transactional client sends."""
    wire: Wire
    producer_id: int
    epoch: int
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def init(cls, wire: Wire) -> "TxnProducer":
        resp = wire.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                    "producer_id": -1, "producer_epoch": -1})
        assert resp.error_code == 0, resp
        return cls(wire, resp.producer_id, resp.producer_epoch)

    def send(self, topic: str, partition: int, values: list[str], *,
             transactional: bool = True, transactional_id: str | None = TXN_ID,
             epoch: int | None = None) -> Any:
        """One batch; returns the partition's answer (error_code, base_offset)."""
        seq = self.sequences.get((topic, partition), 0)
        batch = encode_batch(
            [Record(offset=i, timestamp=int(time.time() * 1000), key=None, value=v.encode())
             for i, v in enumerate(values)],
            producer_id=self.producer_id, producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=seq, is_transactional=transactional)
        resp = self.wire.request(0, 9, {"transactional_id": transactional_id, "acks": -1,
                                        "timeout": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        answer = resp.responses[0].partition_responses[0]
        if answer.error_code == 0:
            self.sequences[(topic, partition)] = seq + len(values)
        return answer

    def end(self, topic: str, partitions: list[int], commit: bool,
            epoch: int | None = None, coordinator_epoch: int = 0) -> list[int]:
        """WriteTxnMarkers for this producer; the error code of each partition."""
        return write_marker(self.wire, self.producer_id, self.epoch if epoch is None else epoch,
                            commit, topic, partitions, coordinator_epoch)


def write_marker(wire: Wire, producer_id: int, epoch: int, commit: bool, topic: str,
                 partitions: list[int], coordinator_epoch: int = 0, version: int = 1) -> list[int]:
    resp = wire.request(27, version, {"markers": [{
        "producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": partitions}]}]})
    return [p.error_code for p in resp.markers[0].topics[0].partitions]


def plain(wire: Wire, topic: str, partition: int, value: str) -> int:
    """A non-transactional record; returns its offset."""
    batch = encode_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None,
                                 value=value.encode())])
    resp = wire.request(0, 9, {"transactional_id": None, "acks": -1, "timeout": 10000,
                               "topic_data": [{"name": topic, "partition_data": [
                                   {"index": partition, "records": batch}]}]})
    answer = resp.responses[0].partition_responses[0]
    assert answer.error_code == 0, answer
    return answer.base_offset


def latest(wire: Wire, topic: str, isolation: int) -> int:
    resp = wire.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": LATEST}]}]})
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def fetch(wire: Wire, topic: str, offset: int, isolation: int) -> Any:
    resp = wire.request(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}]}]})
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, p
    return p


def _collect(poll: Callable[[], list[str]], until: str, label: str,
             timeout: float) -> list[str]:
    """Values from ``poll()`` until ``until`` is among them (bounded by ``timeout``)."""
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while until not in out and time.monotonic() < deadline:
        out += poll()
    assert until in out, f"{until!r} never read ({label}); got {out}"
    return out


def confluent_values(bootstrap: str, topic: str, until: str, isolation: str,
                     timeout: float = 30) -> list[str]:
    """Values read from offset 0 until ``until`` is seen (control batches never show)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])

    def poll() -> list[str]:
        m = c.poll(0.5)
        if m is None:
            return []
        assert not m.error(), m.error()
        return [m.value().decode()]
    try:
        return _collect(poll, until, f"confluent-kafka {isolation}", timeout)
    finally:
        c.close()


def kafka_python_values(bootstrap: str, topic: str, until: str, isolation: str,
                        timeout: float = 30) -> list[str]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level=isolation)
    c.assign([KTP(topic, 0)])
    c.seek_to_beginning()
    try:
        return _collect(lambda: [m.value.decode() for msgs in c.poll(500).values()
                                 for m in msgs], until, f"kafka-python {isolation}", timeout)
    finally:
        c.close()


def aiokafka_values(bootstrap: str, topic: str, until: str, isolation: str,
                    timeout: float = 30) -> list[str]:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def read() -> list[str]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level=isolation)
        await c.start()
        out: list[str] = []
        try:
            c.assign([ATP(topic, 0)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while until not in out and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    out += [m.value.decode() for m in msgs]
        finally:
            await c.stop()
        return out

    out = asyncio.run(read())
    assert until in out, f"{until!r} never read ({isolation}); got {out}"
    return out


def committed_reads(bootstrap: str, topic: str, until: str) -> list[list[str]]:
    """What read_committed consumers of three client libraries read from offset 0."""
    return [confluent_values(bootstrap, topic, until, "read_committed"),
            kafka_python_values(bootstrap, topic, until, "read_committed"),
            aiokafka_values(bootstrap, topic, until, "read_committed")]


# The log every test builds: offsets in comments.
COMMITTED = ["p0", "a1", "a2", "a3", "p1"]
EVERYTHING = ["p0", "a1", "a2", "b1", "a3", "p1"]


def _two_transactions(wire: Wire, topic: str) -> tuple[TxnProducer, TxnProducer]:
    """p0 plain, A and B interleaved, A committed, B aborted, p1 plain:
    0 p0 | 1-2 a1 a2 | 3 b1 | 4 a3 | 5 COMMIT(A) | 6 ABORT(B) | 7 p1."""
    a, b = TxnProducer.init(wire), TxnProducer.init(wire)
    assert plain(wire, topic, 0, "p0") == 0
    assert a.send(topic, 0, ["a1", "a2"]).base_offset == 1
    assert b.send(topic, 0, ["b1"]).base_offset == 3
    assert a.send(topic, 0, ["a3"]).base_offset == 4
    assert latest(wire, topic, READ_COMMITTED) == 1  # A's first offset holds the LSO
    assert a.end(topic, [0], commit=True) == [0]
    assert latest(wire, topic, READ_COMMITTED) == 3  # now B's
    assert b.end(topic, [0], commit=False) == [0]
    assert plain(wire, topic, 0, "p1") == 7
    return a, b


def _open_transaction(wire: Wire, topic: str) -> TxnProducer:
    """8 c1 (C's transaction stays open) | 9 p2."""
    c = TxnProducer.init(wire)
    assert c.send(topic, 0, ["c1"]).base_offset == 8
    assert plain(wire, topic, 0, "p2") == 9
    return c


def _assert_log_view(wire: Wire, topic: str, b: TxnProducer) -> None:
    """What a restart or a new leader must still show: LSO at C's first offset (8),
    B's abort in the index, nothing at or past the LSO for read_committed."""
    assert latest(wire, topic, READ_UNCOMMITTED) == 10
    assert latest(wire, topic, READ_COMMITTED) == 8
    committed = fetch(wire, topic, 0, READ_COMMITTED)
    assert committed.last_stable_offset == 8 and committed.high_watermark == 10
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [
        (b.producer_id, 3)]
    assert _last_offset(committed.records) == 7     # stops before the LSO
    assert fetch(wire, topic, 8, READ_COMMITTED).records in (b"", None)
    uncommitted = fetch(wire, topic, 0, READ_UNCOMMITTED)
    assert _last_offset(uncommitted.records) == 9
    assert uncommitted.last_stable_offset == 8
    # A range after B's abort names no aborted transaction.
    assert list(fetch(wire, topic, 7, READ_COMMITTED).aborted_transactions) == []


def _last_offset(records: bytes | None) -> int:
    from rillet.records import parse_batches
    data = bytes(records or b"")
    headers = parse_batches(data, strict=False) if data else []
    return headers[-1].last_offset if headers else -1


def test_read_committed_hides_aborts_and_stops_at_the_lso_across_restarts(
        tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", config=UNVERIFIED).start()
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    try:
        create_topic(broker.bootstrap, topic, partitions=1)
        with Wire(broker.bootstrap) as wire:
            _, b = _two_transactions(wire, topic)
            assert confluent_values(broker.bootstrap, topic, "p1",
                                    "read_uncommitted") == EVERYTHING
            assert kafka_python_values(broker.bootstrap, topic, "p1",
                                       "read_uncommitted") == EVERYTHING
            for values in committed_reads(broker.bootstrap, topic, "p1"):
                assert values == COMMITTED
            c = _open_transaction(wire, topic)
            _assert_log_view(wire, topic, b)
        # A clean restart (snapshot + .txnindex), then a kill -9 (recovery by replay).
        for stop in (broker.stop, broker.kill):
            stop()
            broker.start()
            with Wire(broker.bootstrap) as wire:
                _assert_log_view(wire, topic, b)
            for values in committed_reads(broker.bootstrap, topic, "p1"):
                assert values == COMMITTED
        with Wire(broker.bootstrap) as wire:
            c.wire = wire
            assert c.end(topic, [0], commit=True) == [0]
            assert latest(wire, topic, READ_COMMITTED) == 11
        for values in committed_reads(broker.bootstrap, topic, "p2"):
            assert values == [*COMMITTED, "c1", "p2"]
    finally:
        broker.stop()


def test_fencing_and_refusals(broker: BrokerProcess) -> None:
    topic = f"txnf-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as wire:
        p = TxnProducer.init(wire)
        # Transactional batches need a transactional id.
        assert p.send(topic, 0, ["x"], transactional_id=None).error_code == TXN_ID_AUTH_FAILED
        assert p.send(topic, 0, ["t1"]).error_code == 0
        # A plain batch from a producer inside its transaction.
        assert p.send(topic, 0, ["x"], transactional=False).error_code == INVALID_TXN_STATE
        # The coordinator bumps the epoch when it aborts (KIP-890): the old epoch is fenced.
        assert p.end(topic, [0], commit=False, epoch=p.epoch + 1) == [0]
        assert p.send(topic, 0, ["late"]).error_code == INVALID_PRODUCER_EPOCH
        assert p.end(topic, [0], commit=True) == [INVALID_PRODUCER_EPOCH]
        # A marker for a partition nobody hosts, and a topic that does not exist.
        assert write_marker(wire, p.producer_id, p.epoch + 1, True, topic, [5]) == [3]
        # Clients may not write control batches.
        from rillet.txn_marker import TxnMarker, encode_marker
        marker = encode_marker(TxnMarker(p.producer_id, p.epoch + 1, True, 0), 0)
        resp = wire.request(0, 9, {"transactional_id": TXN_ID, "acks": -1, "timeout": 5000,
                                   "topic_data": [{"name": topic, "partition_data": [
                                       {"index": 0, "records": marker}]}]})
        assert resp.responses[0].partition_responses[0].error_code == INVALID_RECORD
        # v2 (KIP-890's transaction version field) is served as v1.
        assert write_marker(wire, p.producer_id, p.epoch + 1, False, topic, [0],
                            version=2) == [0]
    assert confluent_values(broker.bootstrap, topic, "t1", "read_uncommitted") == ["t1"]


def test_a_new_leader_knows_open_transactions_and_aborts(tmp_path: Path) -> None:
    from tests.integration.test_replication import _cluster, _leader_of, _replicated_topic
    from tests.integration.test_cluster import WAIT_S, _address
    topic = "txn-rf3"
    with _cluster(tmp_path, **UNVERIFIED).start() as cluster:
        _replicated_topic(cluster, topic, 1)
        leader = _leader_of(cluster, topic, 0)
        with Wire(_address(cluster, leader)) as wire:
            _, b = _two_transactions(wire, topic)
            c = _open_transaction(wire, topic)
            _assert_log_view(wire, topic, b)
        # acks=all put every batch on the whole ISR; the followers replayed them.
        cluster.kill_node(leader)
        survivors = [i for i in cluster.node_ids if i != leader]
        new_leader = read_until(lambda: _leader_of(cluster, topic, 0), lambda n: n in survivors,
                                WAIT_S)
        with Wire(_address(cluster, new_leader)) as wire:
            wait_until(lambda: latest(wire, topic, READ_UNCOMMITTED) == 10, WAIT_S,
                       "the new leader's high watermark to reach the log end")
            _assert_log_view(wire, topic, b)
        bootstrap = _address(cluster, new_leader)
        for values in committed_reads(bootstrap, topic, "p1"):
            assert values == COMMITTED
        with Wire(bootstrap) as wire:
            c.wire = wire
            assert c.end(topic, [0], commit=False) == [0]
            assert latest(wire, topic, READ_COMMITTED) == 11
        for values in committed_reads(bootstrap, topic, "p2"):
            assert values == [*COMMITTED, "p2"]


def test_java_kafka_transactions_abort_ends_a_hanging_transaction(broker: BrokerProcess) -> None:
    """Kafka's own tool finds a hanging transaction (DescribeProducers) and aborts it (the
    Java Admin client's WriteTxnMarkers to the partition leader); the Java console consumer
    with read_committed then reads what is committed only."""
    fetch_kafka_jars()
    topic = f"txnj-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as wire:
        a, b = _two_transactions(wire, topic)
        c = _open_transaction(wire, topic)
        assert latest(wire, topic, READ_COMMITTED) == 8
    tools = KafkaTools(broker.bootstrap)
    txns = ("kafka-transactions", "--bootstrap-server", broker.bootstrap)
    # DescribeProducers: C's open transaction starts at 8; A and B have none open.
    described = tools.run(*txns, "describe-producers", "--topic", topic, "--partition", "0").ok()
    starts = {int(line.split()[0]): line.split()[-1] for line in described.lines[1:]}
    assert starts == {a.producer_id: "None", b.producer_id: "None", c.producer_id: "8"}, \
        described.describe()
    # abort --start-offset finds the producer with DescribeProducers, then WriteTxnMarkers.
    tools.run(*txns, "abort", "--topic", topic, "--partition", "0", "--start-offset", "8").ok()
    with Wire(broker.bootstrap) as wire:
        assert latest(wire, topic, READ_COMMITTED) == 11
        aborted = fetch(wire, topic, 0, READ_COMMITTED).aborted_transactions
        assert [(t.producer_id, t.first_offset) for t in aborted] == [
            (b.producer_id, 3), (c.producer_id, 8)]
    consumed = tools.consume(topic, 6, "--from-beginning", "--isolation-level",
                             "read_committed", timeout_ms=20000)
    values = [line.split("\t")[-1] for line in consumed.lines]
    assert values == [*COMMITTED, "p2"], consumed.describe()
