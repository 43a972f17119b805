"""A broker that comes back as a new process must earn its ISR slots back by fetching.

SIGKILL skips the controlled shutdown, so the broker's old registration still holds ISR
slots when its next process registers; with an emptyDir volume (or a replaced disk) that
process has no log at all. Were it left in the ISR, the next leader election could pick
its empty log and every follower would truncate to it: acknowledged records gone. The
controller takes a re-registering broker out of every ISR (as Kafka does for an unclean
restart, KIP-966); it is added back once it has caught up. Before that rule, the roll test
below lost thousands of acknowledged records on every run.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka import Producer

from tests.checker import check
from tests.cluster import LocalCluster
from tests.integration.test_cluster import (WAIT_S, _address, _create_topic, _fresh, _leader,
                                            _partitions)
from tests.integration.test_replication import AckingProducer, _read_all
from tests.integration.test_rolling_restart import _topic, roll_under_stream
from tests.integration.test_throttle import BROKER, TOPIC, _alter, _log_size
from tests.polling import read_until, wait_until

# Sessions and lag limits far longer than the test: only the re-registration can explain
# the wiped broker leaving the ISR. A small follower fetch keeps its throttled catch-up slow.
CONFIG = {"broker.session.timeout.ms": 120000, "replica.lag.time.max.ms": 120000,
          "replica.fetch.max.bytes": 65536, "replication.quota.window.num": 3,
          "replication.quota.window.size.seconds": 1}
RECORDS = 1000


def _isr(cluster: LocalCluster, via: int, topic: str) -> tuple[int, ...]:
    return _partitions(_address(cluster, via), topic).get(0, (0, (), ()))[2]


def _produce_acked(bootstrap: str, topic: str) -> set[bytes]:
    acked: set[bytes] = set()

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.add(msg.value())
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(topic, value=b"%06d" % i + b"x" * 1000, partition=0, on_delivery=delivered)
        p.poll(0)
    assert p.flush(60) == 0
    return acked


def test_a_broker_back_with_an_empty_disk_is_not_elected_before_it_caught_up(
        tmp_path: Path) -> None:
    with _fresh(tmp_path, **CONFIG).start() as cluster:
        controller = _leader(cluster)
        wiped = next(n for n in cluster.node_ids if n != controller)
        leader, other = [n for n in cluster.node_ids if n != wiped]
        topic = "kept"
        # The wiped broker is first in line after the leader.
        _create_topic(cluster.bootstrap, topic, 1, 3, assignment=[[leader, wiped, other]])
        wait_until(lambda: _isr(cluster, leader, topic) == (leader, wiped, other), WAIT_S,
                   f"{topic} fully in sync")
        _alter(cluster, TOPIC, topic, {"follower.replication.throttled.replicas": f"0:{wiped}"})
        _alter(cluster, BROKER, str(wiped), {"follower.replication.throttled.rate": "20000"})
        acked = _produce_acked(cluster.bootstrap, topic)
        assert len(acked) == RECORDS

        cluster.kill_node(wiped)
        shutil.rmtree(cluster.specs[wiped - 1].log_dir)
        cluster.specs[wiped - 1].log_dir.mkdir()
        cluster.start_node(wiped, timeout=WAIT_S)
        # Removed when it registered, before it serves; 10 s is for the leader to apply it.
        isr = read_until(lambda: _isr(cluster, leader, topic), lambda isr: wiped not in isr,
                         10.0, 0.2)
        assert wiped not in isr, (f"broker {wiped} came back with an empty log and is in the "
                                  f"ISR {isr}; its log holds {_log_size(cluster, wiped, topic)} "
                                  f"bytes")

        # The leader goes: the in-sync broker with the records takes over, not the empty one.
        assert cluster.stop_node(leader) == 0
        led = read_until(lambda: _partitions(_address(cluster, other), topic).get(0, (-1,))[0],
                         lambda n: n not in (leader, -1), WAIT_S, 0.2)
        assert led == other, f"{topic} led by {led}, not by {other}, the replica with the data"
        seen = {r.value for r in _read_all(_address(cluster, other), topic, 1, RECORDS)}
        assert len(acked - seen) == 0, f"{len(acked - seen)} acknowledged records lost"

        # Unthrottled, it catches up and is back in the ISR.
        _alter(cluster, BROKER, str(wiped), {"follower.replication.throttled.rate": None},
               via=other)
        wait_until(lambda: wiped in _isr(cluster, other, topic), WAIT_S,
                   f"broker {wiped} back in the ISR")
        assert _log_size(cluster, wiped, topic) == _log_size(cluster, other, topic)


def test_a_roll_of_brokers_killed_and_back_with_empty_disks_loses_nothing_acknowledged(
        tmp_path: Path) -> None:
    """The operator's roll over emptyDir volumes, when the shutdown is not a clean one: each
    broker in turn is killed and comes back with nothing on disk (the metadata log and its
    vote too), the next only once every partition is fully in sync again, as the roll waits.
    An idempotent acks=all stream runs throughout; everything acknowledged is read back."""
    with _fresh(tmp_path, **{"broker.session.timeout.ms": 120000}).start() as cluster:
        partitions = 6
        _topic(cluster.bootstrap, "wiped-roll",
               [[1 + (p + k) % 3 for k in range(3)] for p in range(partitions)])
        producer = AckingProducer(cluster.bootstrap, "wiped-roll",
                                  **{"message.timeout.ms": 120000}).start()
        try:
            wait_until(lambda: len(producer.acked) > 1000, WAIT_S, "records before the roll")

            def kill_and_wipe(node_id: int) -> None:
                cluster.kill_node(node_id)
                shutil.rmtree(cluster.specs[node_id - 1].log_dir)
                cluster.specs[node_id - 1].log_dir.mkdir()
                cluster.start_node(node_id, timeout=WAIT_S)
            roll_under_stream(cluster, producer, "wiped-roll", partitions, kill_and_wipe)
        finally:
            producer.stop()
        report = check(producer.acked, _read_all(cluster.bootstrap, "wiped-roll", partitions,
                                                 len(producer.acked)))
        assert report.ok, report.summary()
