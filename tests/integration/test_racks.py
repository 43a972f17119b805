"""Rack awareness on six brokers over three racks: placement and fetching from the closest
replica (KIP-392).

Nodes 1-6 sit in zone-a, zone-b, zone-c, zone-a, zone-b, zone-c (voters 1-3). Topics are
created with Kafka's own kafka-topics (the Java client) and confluent-kafka; consumers
that name their rack (client.rack) read from the in-sync follower of their rack, which
each broker's counters on its /metrics endpoint (rillet_server_consumer_fetch_bytes by role)
and its log report (replication/read_replica.py).
"""
from __future__ import annotations

import uuid
from collections import Counter
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewPartitions

from tests.cluster import LocalCluster
from tests.harness import free_ports
from tests.integration.test_admin_http import samples
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.integration.java_tools import parse_consumed
from tests.integration.test_cluster import WAIT_S, _create_topic, _partitions
from tests.polling import read_until, wait_until

RACKS = ["zone-a", "zone-b", "zone-c"]
SETTINGS = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
            "replica.lag.time.max.ms": 3000, "auto.leader.rebalance.enable": "false",
            "replica.selector.class":
                "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
SERVING = "serving consumer fetches as a follower"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("racks"), nodes=6, racks=RACKS, voter_count=3,
                     extra_config=SETTINGS)
    for n, port in zip(c.node_ids, free_ports(len(c.node_ids))):
        c.node(n).config["admin.http.listener"] = f"127.0.0.1:{port}"
    try:
        c.start(timeout=120)
        yield c
    finally:
        c.close()


def _rack(node_id: int) -> str:
    return RACKS[(node_id - 1) % 3]


def _check_spread(parts: dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]],
                  count: int) -> None:
    assert sorted(parts) == list(range(count)), parts
    for p, (_, replicas, _) in parts.items():
        assert len(set(replicas)) == 3, (p, replicas)
        assert {_rack(r) for r in replicas} == set(RACKS), (p, replicas)


def test_every_partition_spans_three_racks_and_load_balances(cluster: LocalCluster) -> None:
    tools = KafkaTools(cluster.bootstrap)
    wait_until(lambda: len(KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
                           .list_topics(timeout=10).brokers) == 6, WAIT_S, "six live brokers")
    tools.topics("--create", "--topic", "spread", "--partitions", "12",
                 "--replication-factor", "3").ok()
    parts = read_until(lambda: _partitions(cluster.bootstrap, "spread"),
                       lambda ps: len(ps) == 12, WAIT_S)
    _check_spread(parts, 12)
    leaders = Counter(leader for leader, _, _ in parts.values())
    replicas = Counter(r for _, rs, _ in parts.values() for r in rs)
    assert sorted(leaders.values()) == [2] * 6, leaders          # 12 leaders over 6 brokers
    assert max(replicas.values()) - min(replicas.values()) <= 2 and len(replicas) == 6, \
        replicas

    admin = KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_partitions([NewPartitions("spread", 18)],
                                          request_timeout=15).values():
        future.result()
    parts = read_until(lambda: _partitions(cluster.bootstrap, "spread"),
                       lambda ps: len(ps) == 18, WAIT_S)
    _check_spread(parts, 18)


def test_explicit_assignments_need_live_brokers(cluster: LocalCluster) -> None:
    assert cluster.stop_node(6) == 0
    try:
        with pytest.raises(Exception, match=r"fenced \(not live\) broker\(s\) \[6\]"):
            _create_topic(cluster.bootstrap, "on-six", 1, 3, [[6, 1, 2]])
        with pytest.raises(Exception, match=r"unknown broker\(s\) \[9\]"):
            _create_topic(cluster.bootstrap, "on-nine", 1, 3, [[9, 1, 2]])
    finally:
        cluster.start_node(6, timeout=120)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, key=b"k%d" % i)
    assert producer.flush(WAIT_S) == 0


def _serving_nodes(cluster: LocalCluster, topic: str) -> list[int]:
    line = f"{topic}-0: {SERVING}"
    return [i for i in cluster.node_ids if line in cluster.node(i).log()]


def _follower_bytes(cluster: LocalCluster) -> dict[int, float]:
    """Record bytes each node has sent to consumers as a follower (its /metrics counter)."""
    key = ("rillet_server_consumer_fetch_bytes_total", (("role", "follower"),))
    return {n: samples(cluster.node(n).config["admin.http.listener"]).get(key, 0.0)
            for n in cluster.node_ids}


def _consume_in_rack(bootstrap: str, topic: str, rack: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "client.rack": rack, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.wait.max.ms": 200})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(msg.error())
            return len(values) >= count
        wait_until(more, WAIT_S, f"{count} records read by a consumer in {rack}", interval=0)
    finally:
        consumer.close()
    return values


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster: LocalCluster) -> None:
    """Replicas 1 (zone-a, leader), 2 (zone-b), 3 (zone-c): a zone-b consumer is sent to
    node 2, and only node 2 serves it; the records are all there, in order."""
    _create_topic(cluster.bootstrap, "near", 1, 3, [[1, 2, 3]])
    wait_until(lambda: _partitions(cluster.bootstrap, "near").get(0, (0, (), ()))[2] ==
               (1, 2, 3), WAIT_S, "near-0 fully in sync")
    _produce(cluster.bootstrap, "near", 300)
    before = _follower_bytes(cluster)
    values = _consume_in_rack(cluster.bootstrap, "near", "zone-b", 300)
    assert values == [b"value-%d" % i for i in range(300)]
    after = _follower_bytes(cluster)
    grew = [n for n in cluster.node_ids if after[n] > before[n]]
    assert grew == [2], (before, after)
    assert after[2] - before[2] >= sum(len(v) for v in values)
    assert _serving_nodes(cluster, "near") == [2], cluster.logs()


def test_a_java_consumer_reads_from_the_follower_in_its_rack(cluster: LocalCluster) -> None:
    _create_topic(cluster.bootstrap, "near-java", 1, 3, [[4, 5, 6]])   # zone-a, -b, -c
    wait_until(lambda: _partitions(cluster.bootstrap, "near-java").get(0, (0, (), ()))[2] ==
               (4, 5, 6), WAIT_S, "near-java-0 fully in sync")
    _produce(cluster.bootstrap, "near-java", 200)
    result = KafkaTools(cluster.bootstrap).consume(
        "near-java", 200, "--from-beginning", "--command-property", "client.rack=zone-c").ok()
    odd = [line for line in result.lines if line.count("\t") != 3]
    assert not odd, (odd[:5], result.stderr[-3000:])
    records = parse_consumed(result)
    assert [r.offset for r in records] == list(range(200)), result.describe()
    assert _serving_nodes(cluster, "near-java") == [6], cluster.logs()


def test_without_a_rack_the_leader_serves(cluster: LocalCluster) -> None:
    _create_topic(cluster.bootstrap, "far", 1, 3, [[1, 2, 3]])
    _produce(cluster.bootstrap, "far", 50)
    assert len(_consume_in_rack(cluster.bootstrap, "far", "", 50)) == 50
    assert _serving_nodes(cluster, "far") == []
