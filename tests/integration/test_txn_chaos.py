"""A transactional ETL under kill -9: exactly once on a 3-node cluster (RF=3, min.insync.replicas=2).

confluent-kafka copies every record of an input topic to an output topic in transactions
(consume, produce the copies, send_offsets_to_transaction, commit), while tests/chaos.py kills
-9 and restarts, one at a time, the node coordinating the transactional id and the nodes
leading the input's and output's partitions. Each copy carries the id of the transaction
attempt that wrote it; every tenth attempt is aborted on purpose, and faults abort more. Read
back with read_committed, tests/checker.py's check_exactly_once proves: every input exactly
once, nothing missing, nothing from an aborted attempt, nothing else.

RILLET_CHAOS_CYCLES / RILLET_CHAOS_SECONDS set the run (make chaos: 100 cycles, 900 s); the
suite's short setting is 3 kills in at most 60 s over 1,000 records.
"""
from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos import ChaosPlan, fault_report, run_chaos
from tests.checker import Copy, check_exactly_once
from tests.cluster import LocalCluster
from tests.integration.test_cluster import _address, _partitions
from tests.integration.test_replication import _cluster, _replicated_topic
from tests.polling import read_until

from ..wire import Wire

CYCLES = int(os.environ.get("RILLET_CHAOS_CYCLES", "3"))
SECONDS = float(os.environ.get("RILLET_CHAOS_SECONDS", "60"))
RECORDS = max(1000, 100 * CYCLES)
PARTITIONS = 3
BATCH = 20
# Transactions are paced to spread over the faults (most of the run), not finish before them.
PACE_S = 0.8 * SECONDS / (RECORDS / BATCH)
ABORT_EVERY = 10
TXN_ID = "etl-chaos"
GROUP = "etl-chaos"
SOURCE, SINK = "etl-in", "etl-out"
CALL_S = 30.0       # one transactional call (init, commit, abort, committed offsets)
FINISH_S = 300.0    # what the ETL may take after the faults to finish copying
RETRY_S = 120.0     # how long a restarting ETL retries one call before it fails the test
RETRY_INTERVAL_S = 0.5   # between two tries: some errors come back at once (NOT_COORDINATOR)
# A workload stopped mid-restart finishes it: two calls retried (init, committed offsets).
WORKLOAD_JOIN_S = 2 * (RETRY_S + CALL_S) + 60
# A call librdkafka may block in past its own timeout (see _watched) is given up after this.
WATCHDOG_S = CALL_S + 15
# librdkafka's debug contexts for the ETL's producer (e.g. "eos,broker"), to diagnose a run.
CLIENT_DEBUG = os.environ.get("RILLET_TXN_CLIENT_DEBUG", "")
pytestmark = pytest.mark.timeout(int(SECONDS + WORKLOAD_JOIN_S + FINISH_S + 600))
STATE = {"transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
         "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
         "offsets.topic.replication.factor": 3,
         "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}


@dataclass
class Outcomes:
    """What the ETL was told about each transaction attempt."""
    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    unknown: set[int] = field(default_factory=set)   # the client lost track; either is fine
    restarts: int = 0


class Stuck(Exception):
    """A client call still blocked WATCHDOG_S after it was made."""


class Etl:
    """The copying loop. A failed transaction is aborted when the client says it can be;
    otherwise producer and consumer start over as a restarted application would: a new
    producer with the same transactional.id fences the old one, and the consumer resumes
    from the group's committed offsets (which read_committed waits to be stable)."""

    def __init__(self, bootstrap: str, ends: dict[int, int]) -> None:
        self.bootstrap = bootstrap
        self.ends = ends                  # partition -> input end offset
        self.outcomes = Outcomes()
        self.attempt = 0
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.positions: dict[int, int] = {}

    # -- start and start over ---------------------------------------------------------------

    def start(self) -> None:
        config = {"bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID,
                  "transaction.timeout.ms": 20000, "linger.ms": 5, "message.timeout.ms": 20000}
        if CLIENT_DEBUG:
            config["debug"] = CLIENT_DEBUG
        self.producer = Producer(config)
        _retry(lambda: self.producer.init_transactions(CALL_S), "init_transactions")
        if self.consumer is None:
            self.consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                                      "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest",
                                      "isolation.level": "read_committed"})
        self.rewind()

    def rewind(self) -> None:
        """Resume every input partition at the group's committed offset."""
        tps = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
        committed = _retry(lambda: self.consumer.committed(tps, CALL_S), "committed offsets")
        self.positions = {tp.partition: max(tp.offset, 0) for tp in committed}
        self.consumer.assign([TopicPartition(SOURCE, p, o) for p, o in self.positions.items()])

    def restart(self) -> None:
        self.outcomes.restarts += 1
        print(f"{time.strftime('%H:%M:%S')} restart {self.outcomes.restarts}", flush=True)
        self.producer = None   # its handle is dropped; the new one fences it
        self.start()

    @property
    def done(self) -> bool:
        return all(self.positions.get(p, 0) >= end for p, end in self.ends.items())

    # -- one transaction --------------------------------------------------------------------

    def step(self) -> None:
        records = [m for m in self.consumer.consume(BATCH, 0.5) if m.error() is None]
        if not records:
            return
        self.attempt += 1
        attempt, abort = self.attempt, self.attempt % ABORT_EVERY == 0
        try:
            self._transaction(records, attempt, abort)
        except KafkaException as exc:
            self._recover(exc.args[0], attempt)
            return
        except Stuck as exc:
            # The attempt never reached commit, and the new producer's InitProducerId
            # fences the stuck one and aborts what it left open: aborted, not unknown.
            print(f"{time.strftime('%H:%M:%S')} attempt {attempt}: {exc}", flush=True)
            self.outcomes.aborted.add(attempt)
            self.restart()
            return
        if abort:
            self.outcomes.aborted.add(attempt)
            self.rewind()
        else:
            self.outcomes.committed.add(attempt)
            self.positions = self._next_positions(records)

    def _transaction(self, records: list[Any], attempt: int, abort: bool) -> None:
        p = self.producer
        p.begin_transaction()
        for m in records:
            p.produce(SINK, m.value() + f"|{attempt}".encode(), key=m.key(),
                      partition=m.partition())
        p.flush(CALL_S)
        offsets = [TopicPartition(SOURCE, part, o)
                   for part, o in self._next_positions(records).items()]
        group = self.consumer.consumer_group_metadata()
        _watched(lambda: p.send_offsets_to_transaction(offsets, group, CALL_S),
                 "send_offsets_to_transaction")
        if abort:
            p.abort_transaction(CALL_S)
            return
        for tries in range(3):
            try:
                p.commit_transaction(CALL_S)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or tries == 2:
                    raise

    def _next_positions(self, records: list[Any]) -> dict[int, int]:
        positions = dict(self.positions)
        for m in records:
            positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
        return positions

    def _recover(self, error: KafkaError, attempt: int) -> None:
        print(f"{time.strftime('%H:%M:%S')} attempt {attempt} failed: {error}", flush=True)
        if error.txn_requires_abort():
            try:
                self.producer.abort_transaction(CALL_S)
                self.outcomes.aborted.add(attempt)
                self.rewind()
                return
            except KafkaException:
                pass
        self.outcomes.unknown.add(attempt)
        self.restart()


def _watched(call: Any, what: str) -> None:
    """Run ``call`` (a librdkafka call given a timeout) in a thread; Stuck if it has not
    returned WATCHDOG_S later. librdkafka 2.16's send_offsets_to_transaction can block past
    its timeout (confluentinc/librdkafka#5456, #5511, open): a node fenced for a moment
    after a kill is left out of Metadata (as Kafka does), the client decommissions that
    broker but keeps it cached as the group coordinator, and its TxnOffsetCommit then waits
    for that broker's state to change, which never happens once the cluster has settled.
    The stuck producer is abandoned, as an application would restart: the thread keeps its
    handle (so it is never destroyed under the blocked call) and the next producer fences
    it."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:   # handed to the caller's thread
            failure.append(exc)
    worker = threading.Thread(target=run, name=f"etl-{what}", daemon=True)
    worker.start()
    worker.join(WATCHDOG_S)
    if worker.is_alive():
        raise Stuck(f"{what} still blocked {WATCHDOG_S:.0f}s after it was called "
                    f"with a {CALL_S:.0f}s timeout")
    if failure:
        raise failure[0]


def _retry(call: Any, what: str, seconds: float = RETRY_S) -> Any:
    """A transactional call that a killed node may fail for a while (retriable errors,
    timeouts, NOT_COORDINATOR until the client finds the new coordinator); bounded, and
    polled at RETRY_INTERVAL_S, not in a tight loop."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except KafkaException as exc:
            print(f"{time.strftime('%H:%M:%S')} {what}: {exc}", flush=True)
            if time.monotonic() > deadline or exc.args[0].fatal():
                raise AssertionError(f"{what} kept failing for {seconds}s: {exc}") from exc
            time.sleep(RETRY_INTERVAL_S)


def _inputs(bootstrap: str) -> tuple[list[bytes], dict[int, int]]:
    """RECORDS unique values spread over the input partitions (idempotent, acks=all); the
    values and each partition's end offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    values = [f"r{i:06d}".encode() for i in range(RECORDS)]
    for i, v in enumerate(values):
        producer.produce(SOURCE, v, key=v, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    ends = {p: len(values[p::PARTITIONS]) for p in range(PARTITIONS)}
    return values, ends


def _read_committed(bootstrap: str, expect: int) -> list[Copy]:
    """The whole output with read_committed, until ``expect`` copies and a few empty polls."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl-verify",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(SINK, p, 0) for p in range(PARTITIONS)])
    copies: list[Copy] = []

    def poll() -> list[Copy]:
        for m in consumer.consume(500, 0.5):
            if m.error() is None:
                source, _, attempt = m.value().rpartition(b"|")
                copies.append(Copy(source, int(attempt)))
        return copies
    try:
        read_until(poll, lambda cs: len(cs) >= expect, 120)
        for _ in range(6):   # anything past the expected count (duplicates) arrives too
            poll()
    finally:
        consumer.close()
    return copies


class Aim:
    """The node a kill hits: in turn the transactional id's coordinator and a leader of an
    input or output partition, as the nodes report them at that moment (faults come one at
    a time, each undone before the next, so every node is up when a kill is aimed)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.turn = 0

    def __call__(self, rng: random.Random) -> int:
        self.turn += 1
        live = self.cluster.node_ids
        candidates = self._coordinator(live) if self.turn % 2 else self._leaders(live, rng)
        return candidates[0] if candidates else rng.choice(live)

    def _coordinator(self, live: list[int]) -> list[int]:
        for node in live:
            try:
                with Wire(_address(self.cluster, node)) as wire:
                    found = wire.request(10, 3, {"key": TXN_ID, "key_type": 1})
                if found.error_code == 0:
                    return [found.node_id]
            except OSError:
                continue
        return []

    def _leaders(self, live: list[int], rng: random.Random) -> list[int]:
        topic = rng.choice([SOURCE, SINK])
        for node in live:
            leaders = [leader for leader, _, _ in _partitions(_address(self.cluster, node),
                                                              topic).values() if leader > 0]
            if leaders:
                return [rng.choice(leaders)]
        return []


def test_transactional_etl_is_exactly_once_under_chaos(tmp_path: Path) -> None:
    seed = int(os.environ.get("RILLET_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"chaos seed {seed} (RILLET_CHAOS_SEED={seed} replays the fault schedule)")
    with _cluster(tmp_path, **STATE).start() as cluster:
        _replicated_topic(cluster, SOURCE, PARTITIONS)
        _replicated_topic(cluster, SINK, PARTITIONS)
        inputs, ends = _inputs(cluster.bootstrap)
        etl = Etl(cluster.bootstrap, ends)
        etl.start()

        def workload(stop: threading.Event) -> None:
            while not stop.is_set() and not etl.done:
                etl.step()
                stop.wait(PACE_S)

        plan = ChaosPlan(cycles=CYCLES, seconds=SECONDS, seed=seed, faults=("kill",),
                         hold=(0.5, 3.0), settle=(1.0, 3.0))
        events = run_chaos(cluster, plan, workload=workload, workload_join=WORKLOAD_JOIN_S,
                           target=Aim(cluster))
        deadline = time.monotonic() + FINISH_S
        while not etl.done and time.monotonic() < deadline:
            etl.step()
        assert etl.done, f"seed {seed}: the ETL stopped at {etl.positions} of {ends}"
        out = etl.outcomes
        copies = _read_committed(cluster.bootstrap, RECORDS)
        report = check_exactly_once(inputs, copies, out.aborted)
        print(f"{fault_report(events)}; {len(out.committed)} transactions committed, "
              f"{len(out.aborted)} aborted, {len(out.unknown)} of unknown outcome, "
              f"{out.restarts} restarts; {report.summary()}")
        assert report.ok, f"seed {seed}: {report.summary()}"
        assert out.aborted, "no transaction was aborted: nothing proves aborts stay invisible"
