"""The transaction coordinator with real broker processes and confluent-kafka's transactional
producer: commit and abort, read_committed consumers seeing only committed records, a second
producer with the same transactional.id fencing the first, a transaction left open aborted
by its timeout, and the coordinator surviving a restart.
"""
from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer

from tests.harness import BrokerProcess
from tests.polling import read_until

from ..wire import Wire
from .clients import create_topic
from .java_tools import KafkaTools, fetch_kafka_jars

WAIT_S = 30.0
CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_TXN_TIMEOUT = 51, 90, 50
INVALID_PRODUCER_ID_MAPPING, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 49, 16, 15


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def send(producer: Producer, topic: str, values: list[str], partition: int | None = None
         ) -> None:
    for v in values:
        if partition is None:
            producer.produce(topic, v.encode(), key=v.encode())
        else:
            producer.produce(topic, v.encode(), partition=partition)
    producer.flush(WAIT_S)


def transaction(producer: Producer, topic: str, values: list[str], commit: bool = True,
                partition: int | None = None) -> None:
    """One whole transaction writing ``values``, committed or aborted."""
    producer.begin_transaction()
    send(producer, topic, values, partition)
    if commit:
        producer.commit_transaction(WAIT_S)
    else:
        producer.abort_transaction(WAIT_S)


def consume_all(bootstrap: str, topic: str, isolation: str, expect: int,
                settle: Callable[[list[str]], bool] | None = None) -> list[str]:
    """Every value of ``topic`` from the start with ``isolation``: read until ``expect``
    values arrived (and ``settle`` holds), bounded by WAIT_S."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": isolation})
    consumer.subscribe([topic])
    values: list[str] = []
    try:
        def poll() -> list[str]:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
            return values
        read_until(poll, lambda vs: len(vs) >= expect and (settle is None or settle(vs)),
                   WAIT_S)
        # Nothing more is on its way: a few empty polls past what we waited for.
        for _ in range(4):
            poll()
    finally:
        consumer.close()
    return values


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", config={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
        "transaction.state.log.num.partitions": 5, "offsets.topic.num.partitions": 5,
        "group.initial.rebalance.delay.ms": 0})
    b.start()
    yield b
    b.stop()


def test_commit_and_abort_with_confluent_kafka(txn_broker: BrokerProcess) -> None:
    topic = f"txc-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=3)
    producer = txn_producer(txn_broker.bootstrap, f"tx-{topic}")
    transaction(producer, topic, [f"c{i}" for i in range(30)])
    transaction(producer, topic, [f"a{i}" for i in range(20)], commit=False)
    transaction(producer, topic, ["c-last"])
    committed = consume_all(txn_broker.bootstrap, topic, "read_committed", 31)
    assert sorted(committed) == sorted([f"c{i}" for i in range(30)] + ["c-last"])
    everything = consume_all(txn_broker.bootstrap, topic, "read_uncommitted", 51)
    assert len(everything) == 51 and {v for v in everything if v.startswith("a")} == {
        f"a{i}" for i in range(20)}


def test_a_second_producer_fences_the_first(txn_broker: BrokerProcess) -> None:
    topic = f"txf-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=1)
    txn_id = f"tx-{topic}"
    zombie = txn_producer(txn_broker.bootstrap, txn_id)
    zombie.begin_transaction()
    send(zombie, topic, ["zombie-open"], partition=0)
    # The new instance's InitProducerId aborts the zombie's open transaction and bumps the
    # epoch past it.
    fresh = txn_producer(txn_broker.bootstrap, txn_id)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, b"zombie-late", partition=0)
        zombie.commit_transaction(WAIT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                            KafkaError.INVALID_PRODUCER_EPOCH), error
    transaction(fresh, topic, ["fresh"], partition=0)
    assert consume_all(txn_broker.bootstrap, topic, "read_committed", 1) == ["fresh"]


def test_coordinator_refusals_on_the_wire(txn_broker: BrokerProcess) -> None:
    txn_id = f"tx-wire-{uuid.uuid4().hex[:6]}"
    with Wire(txn_broker.bootstrap) as wire:
        found = wire.request(10, 3, {"key": txn_id, "key_type": 1})
        assert found.error_code == 0 and found.port == txn_broker.port
        too_long = wire.request(22, 4, {"transactional_id": txn_id,
                                        "transaction_timeout": 10**9, "producer_id": -1,
                                        "producer_epoch": -1})
        assert too_long.error_code == INVALID_TXN_TIMEOUT

        def init(version: int = 4, pid: int = -1, epoch: int = -1) -> Any:
            return read_until(lambda: wire.request(22, version, {
                "transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": pid,
                "producer_epoch": epoch}), lambda r: r.error_code != CONCURRENT_TRANSACTIONS,
                WAIT_S)
        first = init()
        assert first.error_code == 0 and first.producer_epoch == 0
        second = init()
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        # KIP-360: a producer naming an older epoch is fenced.
        assert init(pid=first.producer_id, epoch=0).error_code == PRODUCER_FENCED
        end = wire.request(26, 3, {"transactional_id": txn_id, "producer_id": first.producer_id,
                                   "producer_epoch": 0, "committed": True})
        assert end.error_code == PRODUCER_FENCED
        old = wire.request(26, 1, {"transactional_id": txn_id, "producer_id": first.producer_id,
                                   "producer_epoch": 0, "committed": True})
        assert old.error_code == 47   # INVALID_PRODUCER_EPOCH before v2
        unknown = wire.request(24, 3, {
            "v3_and_below_transactional_id": "never-initialised",
            "v3_and_below_producer_id": 5, "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": []})
        assert unknown.results_by_topic_v3_and_below == ()


def test_transaction_state_needs_as_many_brokers_as_its_replication_factor(
        tmp_path: Path) -> None:
    """As Kafka: __transaction_state is not created with fewer live brokers than
    transaction.state.log.replication.factor (a single node that sets 3); FindCoordinator
    answers COORDINATOR_NOT_AVAILABLE, retriable, naming the setting. Unset, a single node
    uses 1, as Kafka's single-node server.properties does (every other test here)."""
    node = BrokerProcess(tmp_path / "data", config={
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.num.partitions": 3})
    node.start()
    try:
        with Wire(node.bootstrap) as wire:
            found = wire.request(10, 3, {"key": "tx-refused", "key_type": 1})
            assert found.error_code == COORDINATOR_NOT_AVAILABLE, found
            assert ("replication factor 3 (transaction.state.log.replication.factor) is larger "
                    "than the 1 live broker(s)") in (found.error_message or ""), found
            init = wire.request(22, 4, {"transactional_id": "tx-refused",
                                        "transaction_timeout": 60000, "producer_id": -1,
                                        "producer_epoch": -1})
            assert init.error_code in (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), init
            # Groups still serve: __consumer_offsets is capped at the live brokers.
            assert wire.request(10, 3, {"key": "g", "key_type": 0}).error_code == 0
    finally:
        node.stop()


def test_an_open_transaction_is_aborted_by_its_timeout(txn_broker: BrokerProcess) -> None:
    topic = f"txt-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=1)
    producer = txn_producer(txn_broker.bootstrap, f"tx-{topic}",
                            **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    send(producer, topic, ["timed-out"], partition=0)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    plain.produce(topic, b"after", partition=0)
    plain.flush(WAIT_S)
    # The open transaction holds the last stable offset until the timer aborts it.
    values = consume_all(txn_broker.bootstrap, topic, "read_committed", 1)
    assert values == ["after"]
    with pytest.raises(KafkaException):
        producer.commit_transaction(WAIT_S)


def test_committed_transactions_survive_a_restart(txn_broker: BrokerProcess) -> None:
    topic = f"txr-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=2)
    txn_id = f"tx-{topic}"
    producer = txn_producer(txn_broker.bootstrap, txn_id)
    transaction(producer, topic, ["before"])
    producer.begin_transaction()
    send(producer, topic, ["open-at-restart"])
    txn_broker.restart()
    # The reloaded coordinator knows the id: a new instance aborts the open transaction.
    fresh = txn_producer(txn_broker.bootstrap, txn_id)
    transaction(fresh, topic, ["after"])
    values = consume_all(txn_broker.bootstrap, topic, "read_committed", 2)
    assert sorted(values) == ["after", "before"]


class Pipeline:
    """A consume-transform-produce loop: read ``source`` in group ``group``, write each value
    to ``sink`` and commit the consumed offsets inside the same transaction."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
        self.sink = sink
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        self.consumer.subscribe([source])
        self.producer = txn_producer(bootstrap, txn_id)

    def batch(self, size: int) -> list[Any]:
        """Up to ``size`` records (an empty list once the source is drained)."""
        got: list[Any] = []
        for _ in range(20):
            got += [m for m in self.consumer.consume(size - len(got), 0.5) if m.error() is None]
            if len(got) >= size or (got and not self.consumer.assignment()):
                break
        return got

    def process(self, records: list[Any], commit: bool) -> None:
        self.producer.begin_transaction()
        for m in records:
            self.producer.produce(self.sink, b"o-" + m.value())
        # Written before the transaction ends: abort_transaction drops what is still queued,
        # and the aborted copies must be in the log for the check below to mean anything.
        self.producer.flush(WAIT_S)
        self.producer.send_offsets_to_transaction(
            self.consumer.position(self.consumer.assignment()),
            self.consumer.consumer_group_metadata(), WAIT_S)
        if commit:
            self.producer.commit_transaction(WAIT_S)
            return
        self.producer.abort_transaction(WAIT_S)
        # The aborted records are read again from the group's committed offsets.
        committed = self.consumer.committed(self.consumer.assignment(), WAIT_S)
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            self.consumer.seek(tp)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(WAIT_S)


def test_consume_transform_produce_is_exactly_once(txn_broker: BrokerProcess) -> None:
    """send_offsets_to_transaction: the offsets commit with the output, an abort rewinds both,
    and a broker restart between transactions loses and repeats nothing."""
    bootstrap = txn_broker.bootstrap
    suffix = uuid.uuid4().hex[:6]
    source, sink, group = f"in-{suffix}", f"out-{suffix}", f"eos-{suffix}"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, sink, partitions=2)
    plain = Producer({"bootstrap.servers": bootstrap})
    inputs = [f"r{i}" for i in range(60)]
    for v in inputs:
        plain.produce(source, v.encode(), key=v.encode())
    plain.flush(WAIT_S)

    pipeline = Pipeline(bootstrap, source, sink, group, f"tx-{suffix}")
    pipeline.process(pipeline.batch(10), commit=True)
    rolled_back = pipeline.batch(10)
    aborted = len(rolled_back)
    pipeline.process(rolled_back, commit=False)
    pipeline.process(pipeline.batch(10), commit=True)
    pipeline.close()

    txn_broker.restart()
    pipeline = Pipeline(bootstrap, source, sink, group, f"tx-{suffix}")
    done = 0
    for _ in range(30):
        records = pipeline.batch(10)
        if not records:
            if done >= 40:
                break
            continue
        done += len(records)
        pipeline.process(records, commit=True)
    pipeline.close()
    out = consume_all(bootstrap, sink, "read_committed", len(inputs))
    wanted = Counter(f"o-{v}" for v in inputs)
    assert Counter(out) == wanted, (f"missing {sorted(wanted - Counter(out))}, "
                                    f"extra {sorted(Counter(out) - wanted)}")
    # The aborted transaction's copies are in the log, invisible to read_committed.
    everything = consume_all(bootstrap, sink, "read_uncommitted", len(inputs) + aborted)
    assert len(everything) == len(inputs) + aborted, sorted(Counter(everything) - wanted)


def test_kafka_transactions_list_and_describe(txn_broker: BrokerProcess) -> None:
    """Kafka's own tool: ListTransactions on every broker, FindCoordinator and
    DescribeTransactions for one id."""
    fetch_kafka_jars()
    bootstrap = txn_broker.bootstrap
    topic = f"txj-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=2)
    done_id, open_id = f"done-{topic}", f"open-{topic}"
    done = txn_producer(bootstrap, done_id)
    transaction(done, topic, ["x"], partition=0)
    still_open = txn_producer(bootstrap, open_id)
    still_open.begin_transaction()
    send(still_open, topic, ["y"], partition=1)

    tools = KafkaTools(bootstrap)
    txns = ("kafka-transactions", "--bootstrap-server", bootstrap)
    listed = tools.run(*txns, "list").ok()
    rows = {line.split()[0]: line.split() for line in listed.lines[1:]}
    assert rows[done_id][1:] == [str(txn_broker.node_id), rows[done_id][2], "CompleteCommit"], \
        listed.describe()
    assert rows[open_id][-1] == "Ongoing", listed.describe()
    described = tools.run(*txns, "describe", "--transactional-id", open_id).ok()
    header, values = described.lines[0].split("\t"), described.lines[1].split("\t")
    row = dict(zip([h.strip() for h in header], [v.strip() for v in values]))
    assert row["TransactionalId"] == open_id and row["TransactionState"] == "Ongoing", \
        described.describe()
    assert row["TopicPartitions"] == f"{topic}-1", described.describe()
    missing = tools.run(*txns, "describe", "--transactional-id", "never-seen")
    assert missing.returncode != 0 and "could not be found" in missing.stderr, \
        missing.describe()
    # An id with no transaction started yet: its start time is -1.
    idle_id = f"idle-{topic}"
    txn_producer(bootstrap, idle_id)
    idle = tools.run(*txns, "describe", "--transactional-id", idle_id).ok()
    fields = [f.strip() for f in idle.lines[1].split("\t")]
    assert fields[4] == "Empty" and fields[6] == "None", idle.describe()
    still_open.abort_transaction(WAIT_S)


def test_a_killed_coordinator_is_replaced_mid_transaction(tmp_path: Path) -> None:
    """RF=3, min.insync.replicas=2: the node coordinating a transactional id is killed -9 with
    a transaction open. The next leader of the id's __transaction_state partition loads it
    and the producer commits there; a later abort stays invisible; everything committed is
    read back once with read_committed, also after the killed node returns."""
    from tests.integration.test_cluster import _address
    from tests.integration.test_replication import _cluster, _replicated_topic
    state = {"transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
             "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    topic, txn_id = "txn-failover", "tx-failover"
    with _cluster(tmp_path, **state).start() as cluster:
        _replicated_topic(cluster, topic, 3)
        producer = txn_producer(cluster.bootstrap, txn_id)
        with Wire(_address(cluster, cluster.node_ids[0])) as wire:
            found = wire.request(10, 3, {"key": txn_id, "key_type": 1})
        assert found.error_code == 0
        victim = found.node_id
        transaction(producer, topic, [f"a{i}" for i in range(30)])
        producer.begin_transaction()
        send(producer, topic, [f"b{i}" for i in range(30)])
        cluster.kill_node(victim)
        survivor = next(_address(cluster, i) for i in cluster.node_ids if i != victim)
        # librdkafka finds the new coordinator (COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR
        # meanwhile), which commits with markers on the partitions' current leaders.
        producer.commit_transaction(60)
        transaction(producer, topic, [f"x{i}" for i in range(10)], commit=False)
        expected = sorted([f"a{i}" for i in range(30)] + [f"b{i}" for i in range(30)])
        assert sorted(consume_all(survivor, topic, "read_committed", 60)) == expected
        cluster.start_node(victim)
        transaction(producer, topic, ["c"])
        assert sorted(consume_all(_address(cluster, victim), topic, "read_committed", 61)) == \
            sorted(expected + ["c"])
