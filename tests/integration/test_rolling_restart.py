"""A cluster that rebalances its leaders by itself, restarted node by node under load.

Three nodes, automatic leader rebalance every two seconds. A restarted broker first
loses its leaderships (controlled shutdown), then gets its preferred ones back once it
is in the ISR again, without any tool. The rolling restart runs an idempotent acks=all
producer throughout: every send must be acknowledged (none fails) and the checker must
find nothing lost, duplicated or reordered.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tests.checker import check
from tests.cluster import LocalCluster
from tests.integration.test_cluster import RACKS, WAIT_S, _partitions
from tests.integration.test_replication import TOPIC_CONFIG, AckingProducer, _read_all
from tests.polling import read_until, wait_until

SETTINGS = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
            "replica.lag.time.max.ms": 3000, "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": 2}
RESTART_WAIT_S = 120.0


def _cluster(tmp_path: Path) -> LocalCluster:
    return LocalCluster(tmp_path, nodes=3, racks=RACKS, extra_config=SETTINGS)


def _topic(bootstrap: str, name: str, assignment: list[list[int]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=TOPIC_CONFIG)
    for future in admin.create_topics([topic], request_timeout=15).values():
        future.result()
    wait_until(lambda: len(_partitions(bootstrap, name)) == len(assignment), WAIT_S,
               f"{name} to exist")


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: leader for p, (leader, _, _) in _partitions(bootstrap, topic).items()}


def _full_isr(parts: dict[int, Any], count: int) -> bool:
    return len(parts) == count and all(len(isr) == 3 and leader >= 0
                                       for leader, _, isr in parts.values())


def roll_under_stream(cluster: LocalCluster, producer: AckingProducer, topic: str,
                      partitions: int, restart: Callable[[int], None]) -> None:
    """Restarts every node in turn with `restart(node_id)`, the next only once every
    partition is fully in sync again (as the operator's roll waits), and the stream has
    gone on past the returned node."""
    for node_id in cluster.node_ids:
        before = len(producer.acked)
        restart(node_id)
        parts = read_until(lambda: _partitions(cluster.bootstrap, topic),
                           lambda ps: _full_isr(ps, partitions), RESTART_WAIT_S, interval=0.5)
        assert _full_isr(parts, partitions), (node_id, parts, cluster.logs())
        wait_until(lambda: len(producer.acked) > before + 500, WAIT_S,
                   f"the stream to go on after node {node_id} returned")


def test_leaders_return_to_a_restarted_broker_by_themselves(tmp_path: Path) -> None:
    with _cluster(tmp_path).start() as cluster:
        assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [2, 1, 3]]
        _topic(cluster.bootstrap, "balanced", assignment)
        preferred = {p: r[0] for p, r in enumerate(assignment)}
        wait_until(lambda: _leaders(cluster.bootstrap, "balanced") == preferred, WAIT_S,
                   "the preferred leaders at creation")
        assert cluster.stop_node(2) == 0
        moved = read_until(lambda: _leaders(cluster.bootstrap, "balanced"),
                           lambda ls: len(ls) == 4 and 2 not in ls.values(), WAIT_S)
        assert 2 not in moved.values(), moved
        cluster.start_node(2)
        leaders = read_until(lambda: _leaders(cluster.bootstrap, "balanced"),
                             lambda ls: ls == preferred, WAIT_S)
        assert leaders == preferred, (leaders, cluster.logs())
        assert "leader rebalance: preferred leaders elected" in "".join(
            cluster.node(i).log() for i in cluster.node_ids)


def test_rolling_restart_under_load_loses_and_fails_nothing(tmp_path: Path) -> None:
    with _cluster(tmp_path).start() as cluster:
        partitions = 6
        _topic(cluster.bootstrap, "rolling",
               [[1 + (p + k) % 3 for k in range(3)] for p in range(partitions)])
        producer = AckingProducer(cluster.bootstrap, "rolling",
                                  **{"message.timeout.ms": 120000}).start()
        try:
            wait_until(lambda: len(producer.acked) > 1000, WAIT_S, "records before the roll")

            def restart(node_id: int) -> None:
                assert cluster.stop_node(node_id) == 0, cluster.node(node_id).log()[-3000:]
                cluster.start_node(node_id)
            roll_under_stream(cluster, producer, "rolling", partitions, restart)
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:5]
        assert producer.sent == len(producer.acked), (producer.sent, len(producer.acked))
        report = check(producer.acked, _read_all(cluster.bootstrap, "rolling", partitions,
                                                 len(producer.acked)))
        assert report.ok, report.summary()
