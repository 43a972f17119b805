"""Partitions of the data links between brokers (Jepsen-style), on an addressed LocalCluster:
every link between two nodes (quorum, replication, forwarding, registration) goes through a
gate that can cut it, while clients reach every node (tests/node_gate.py).

RF=3, min.insync.replicas=2, an idempotent acks=all producer running throughout: the leader
of the partition is cut from its followers (both ways, or only what it sends them), but not
from clients. It must acknowledge nothing alone: the producer gets errors or timeouts from it,
the majority elects a new leader, and after healing every acknowledged record is read back,
once and in order, and the replicas are byte-identical.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, TopicPartition

from tests.checker import Read, check
from tests.cluster import LocalCluster
from tests.integration.test_cluster import RACKS, WAIT_S
from tests.integration.test_replication import (REPLICATION, AckingProducer, _leader_of,
                                                _leader_seen_by, _produce_to_only,
                                                _replicas_identical, _replicated_topic)
from tests.polling import wait_until

ACKED_BEFORE = 100   # records acknowledged before the fault, and again after it
# A produce to the cut leader times out after request.timeout.ms; the idempotent producer
# gives up on what it had in flight to it only at message.timeout.ms, then carries on at the
# new leader (librdkafka), so that bounds how long the test waits.
PRODUCER = {"request.timeout.ms": 5000, "message.timeout.ms": 15000}


def _cluster(tmp_path: Path) -> LocalCluster:
    return LocalCluster(tmp_path, nodes=3, racks=RACKS, extra_config=REPLICATION,
                        addressed=True)


def _read_to_end(bootstrap: str, topic: str, partition: int = 0) -> list[Read]:
    """Every record of one partition up to its high watermark: written records the producer
    never heard acknowledged are there too, so reading as many as were acknowledged would
    stop short."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{random.random()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                timeout=WAIT_S)
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[Read] = []
        deadline = time.monotonic() + WAIT_S
        while (not got or got[-1].offset < end - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(Read(msg.partition(), msg.offset(), msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


def _leader_cut_off(tmp_path: Path, cut: Callable[[LocalCluster, int, int], None]) -> None:
    """Cut the leader of p-0 from both followers with `cut(cluster, leader, follower)`
    while a producer runs; heal; check nothing acknowledged is lost."""
    started = time.monotonic()

    def phase(what: str) -> None:
        print(f"t={time.monotonic() - started:5.1f}s {what}")

    with _cluster(tmp_path).start() as cluster:
        phase("cluster ready")
        _replicated_topic(cluster, "p", 1)
        old = _leader_of(cluster, "p", 0)
        others = [i for i in cluster.node_ids if i != old]
        producer = AckingProducer(cluster.bootstrap, "p", partitions=1, max_rate=1000,
                                  **PRODUCER).start()
        try:
            wait_until(lambda: len(producer.acked) >= ACKED_BEFORE, WAIT_S,
                       "the producer to be acknowledged before the fault")
            for follower in others:
                cut(cluster, old, follower)
            phase(f"leader {old} cut")
            for node_id in others:
                wait_until(lambda: _leader_seen_by(cluster, node_id, "p", 0) in others,
                           WAIT_S, f"node {node_id} to see a new leader")
            phase("new leader seen")
            # Clients still reach the old leader, and it acknowledges nothing alone.
            address = cluster.node(old).bootstrap
            assert cluster.node(old).answers(5.0), "the cut leader stopped answering clients"
            assert _produce_to_only(address, "p", timeout_ms=3000) != 0, \
                "a leader cut from its followers acknowledged an acks=all write"
            during = len(producer.acked)
            wait_until(lambda: len(producer.acked) >= during + ACKED_BEFORE, WAIT_S,
                       "the producer to carry on at the new leader")
            phase("producer acknowledged at the new leader")
            cluster.heal_all()
            wait_until(lambda: _leader_seen_by(cluster, old, "p", 0) in others, WAIT_S,
                       "the old leader to learn of the new one")
            phase("healed: the old leader follows")
        finally:
            producer.stop()
        final = _read_to_end(cluster.bootstrap, "p")
        phase("read back")
        print(f"{producer.sent} sent, {len(producer.acked)} acknowledged, "
              f"{len(producer.errors)} failed")
        report = check(producer.acked, final)
        assert report.ok, report.summary()
        wait_until(lambda: _replicas_identical(cluster, "p", 0, cluster.node_ids), WAIT_S,
                   "the replicas to be identical")
        phase("replicas identical")


def test_a_leader_cut_from_its_followers_but_not_clients_loses_nothing(tmp_path: Path) -> None:
    _leader_cut_off(tmp_path, lambda cluster, a, b: cluster.cut(a, b, "blackhole"))


def test_a_leader_whose_messages_to_followers_are_dropped_loses_nothing(
        tmp_path: Path) -> None:
    # One way: the followers' requests reach the leader, its answers never reach them.
    _leader_cut_off(tmp_path, lambda cluster, a, b: cluster.cut_one_way(a, b, "blackhole"))
