"""Wall-clock steps (NTP jumps) on one node, with libfaketime (tests/clock_faults.py).

Every node runs under its own fake wall clock (offset 0 until stepped); the monotonic clock
is never faked. Mid-run, the active controller's wall clock jumps 10 minutes forward, then
to 10 minutes behind real time, then runs 4 times too fast, while an idempotent acks=all producer (RF=3,
min.insync.replicas=2) and a consumer group run. Kafka times sessions, leases and deadlines
on the monotonic clock; so must rillet: no broker is fenced, the group does not rebalance
(its coordinator's clock is stepped too), and every acknowledged record is read back.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.checker import check
from tests.clock_faults import PACKAGE, FakeClock, libfaketime
from tests.cluster import LocalCluster
from tests.integration.test_cluster import RACKS, WAIT_S, _leader
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_replication import (REPLICATION, AckingProducer, _coordinator,
                                                _replicas_identical, _replicated_topic)
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(libfaketime() is None,
                                reason=f"libfaketime is not installed (apt-get install {PACKAGE})")

STEP_S = 600
SESSION_S = REPLICATION["broker.session.timeout.ms"] / 1000
# How long each fault is held: past two broker sessions, and a consumer session timeout, so
# a timer on the wall clock would have fired.
HOLD_S = 2 * SESSION_S
FAST = 4.0
GROUP_SESSION_MS = 6000


class Assignments:
    """A consumer group member polling in a thread, counting the assignments it gets."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.count = 0
        self.stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "clocked",
                                   "auto.offset.reset": "earliest",
                                   "session.timeout.ms": GROUP_SESSION_MS,
                                   "heartbeat.interval.ms": 500})
        self._consumer.subscribe([topic], on_assign=self._on_assign)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer: Consumer, partitions: list) -> None:
        self.count += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            self._consumer.poll(0.2)
        self._consumer.close()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(30)


def _hold(cluster: LocalCluster, nodes: list[int], producer: AckingProducer,
          seconds: float) -> None:
    """Keep the step for `seconds`: every node stays unfenced and the producer acknowledged."""
    started, acked = time.monotonic(), len(producer.acked)
    while time.monotonic() - started < seconds:
        for node_id in nodes:
            assert "fenced (no heartbeat" not in cluster.node(node_id).log(), cluster.logs()
        time.sleep(0.2)
    assert len(producer.acked) > acked, "nothing acknowledged while the clock was stepped"


def test_a_controller_clock_stepped_each_way_and_running_fast_loses_nothing(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes=3, racks=RACKS,
                           extra_config={**REPLICATION, "offsets.topic.num.partitions": 1,
                                         "group.initial.rebalance.delay.ms": 0})
    clocks = {i: FakeClock(tmp_path / f"clock-{i}") for i in cluster.node_ids}
    for node_id, clock in clocks.items():
        cluster.node(node_id).env.update(clock.env())
    with cluster.start():
        _replicated_topic(cluster, "t", 3)
        producer = AckingProducer(cluster.bootstrap, "t").start()
        group = Assignments(cluster.bootstrap, "t")
        try:
            wait_until(lambda: group.count >= 1 and len(producer.acked) >= 100, WAIT_S,
                       "the group to get its assignment and the producer its first acks")
            controller = _leader(cluster)
            stepped = sorted({controller, _coordinator(cluster.bootstrap, "clocked")})
            print(f"controller {controller}; stepping the wall clock of nodes {stepped}")
            for offset in (STEP_S, -STEP_S):
                for node_id in stepped:
                    clocks[node_id].step(offset - clocks[node_id].offset)
                _hold(cluster, cluster.node_ids, producer, HOLD_S)
            for node_id in stepped:
                clocks[node_id].step(-clocks[node_id].offset)
                clocks[node_id].run_fast(FAST)
            _hold(cluster, cluster.node_ids, producer, HOLD_S)
            assert group.count == 1, "the group rebalanced when a wall clock stepped"
        finally:
            group.close()
            producer.stop()
        assert _leader(cluster) == controller, "the controller lost its leadership"
        final = _read_to_end_all(cluster, "t", 3)
        report = check(producer.acked, final)
        print(f"{producer.sent} sent, {len(producer.acked)} acknowledged; {report.summary()}")
        assert report.ok, report.summary()
        for p in range(3):
            wait_until(lambda: _replicas_identical(cluster, "t", p, cluster.node_ids), WAIT_S,
                       f"the replicas of t-{p} to be identical")


def _read_to_end_all(cluster: LocalCluster, topic: str, partitions: int) -> list:
    return [r for p in range(partitions) for r in _read_to_end(cluster.bootstrap, topic, p)]
