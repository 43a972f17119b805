"""Leader elections, log dirs and unregistering brokers, through Kafka's own tools.

One shared cluster: four nodes (voters 1-3, node 4 a broker the tests empty and finally
unregister), racks, automatic leader rebalance off so that only the tools move leaders.
kafka-leader-election (ElectLeaders), kafka-log-dirs (DescribeLogDirs) and kafka-cluster
unregister (UnregisterBroker) are the Java client; topic state is read with
confluent-kafka's Metadata.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient as KafkaAdmin

from tests.cluster import LocalCluster
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.integration.test_cluster import WAIT_S, _address, _create_topic, _partitions
from tests.polling import read_until, wait_until

SETTINGS = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
            "replica.lag.time.max.ms": 3000, "auto.leader.rebalance.enable": "false"}
RACKS = ["zone-a", "zone-b", "zone-c", "zone-a"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("leaders"), nodes=4, racks=RACKS, voter_count=3,
                     extra_config=SETTINGS)
    try:
        c.start()
        yield c
    finally:
        c.close()


def _tools(cluster: LocalCluster, among: list[int] | None = None) -> KafkaTools:
    nodes = among or [1, 2, 3]
    return KafkaTools(",".join(_address(cluster, i) for i in nodes))


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed: list[Any] = []
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, key=b"%d" % i,
                         on_delivery=lambda err, _: err and failed.append(err))
    assert producer.flush(WAIT_S) == 0 and not failed, failed[:3]


def _full_isr(bootstrap: str, topic: str, partitions: int, replicas: int) -> bool:
    parts = _partitions(bootstrap, topic)
    return len(parts) == partitions and all(
        len(isr) == replicas and leader >= 0 for leader, _, isr in parts.values())


def _restart(cluster: LocalCluster, node_id: int, topic: str, partitions: int) -> None:
    """SIGTERM (controlled shutdown moves its leaderships away), start, full ISRs again."""
    assert cluster.stop_node(node_id) == 0, cluster.node(node_id).log()[-3000:]
    cluster.start_node(node_id)
    bootstrap = _tools(cluster).bootstrap
    wait_until(lambda: _full_isr(bootstrap, topic, partitions, 3), WAIT_S,
               f"every partition of {topic} back to a full ISR after node {node_id} returned")


def test_preferred_election_moves_leaders_back_after_a_restart(cluster: LocalCluster) -> None:
    bootstrap = _tools(cluster).bootstrap
    assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    _create_topic(bootstrap, "pref", 3, 3, assignment)
    _produce(bootstrap, "pref", 300)
    _restart(cluster, 2, "pref", 3)
    leaders = {p: leader for p, (leader, _, _) in _partitions(bootstrap, "pref").items()}
    assert leaders[1] != 2, f"node 2 should have handed partition 1 away: {leaders}"

    result = _tools(cluster).run("kafka-leader-election", "--bootstrap-server", bootstrap,
                                 "--election-type", "PREFERRED", "--all-topic-partitions").ok()
    assert "Successfully completed leader election (PREFERRED)" in result.stdout, \
        result.describe()
    assert "pref-1" in result.stdout, result.describe()
    parts = read_until(lambda: _partitions(bootstrap, "pref"),
                       lambda ps: [ps[p][0] for p in range(3)] == [1, 2, 3], WAIT_S)
    assert [parts[p][0] for p in range(3)] == [1, 2, 3], parts

    # Nothing left to do: the tool still succeeds, naming no partition as moved.
    again = _tools(cluster).run("kafka-leader-election", "--bootstrap-server", bootstrap,
                                "--election-type", "PREFERRED", "--topic", "pref",
                                "--partition", "1")
    assert "Valid replica already elected for partitions pref-1" in again.stdout, \
        again.describe()


def _log_dirs(tools: KafkaTools, topic: str) -> dict[int, dict[str, dict[str, Any]]]:
    """kafka-log-dirs --describe: broker -> partition name -> its entry (size, offsetLag)."""
    result = tools.run("kafka-log-dirs", "--bootstrap-server", tools.bootstrap, "--describe",
                       "--topic-list", topic)
    if result.returncode != 0:
        return {}
    [line] = [ln for ln in result.lines if ln.startswith("{")]
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for broker in json.loads(line)["brokers"]:
        entries = out.setdefault(broker["broker"], {})
        for log_dir in broker["logDirs"]:
            assert log_dir["error"] is None and Path(log_dir["logDir"]).is_absolute(), log_dir
            for part in log_dir["partitions"]:
                entries[part["partition"]] = part
    return out


def test_log_dirs_show_every_replica_with_its_size(cluster: LocalCluster) -> None:
    bootstrap = _tools(cluster).bootstrap
    _create_topic(bootstrap, "sized", 3, 3, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    _produce(bootstrap, "sized", 500)
    names = {f"sized-{p}" for p in range(3)}

    def complete(dirs: dict[int, dict[str, dict[str, Any]]]) -> bool:
        return all(set(dirs.get(b, {})) == names and
                   all(e["size"] > 0 and e["offsetLag"] == 0 for e in dirs[b].values())
                   for b in (1, 2, 3))

    dirs = read_until(lambda: _log_dirs(_tools(cluster), "sized"), complete, WAIT_S,
                      interval=1.0)
    assert complete(dirs), dirs
    assert dirs.get(4, {}) == {}, "node 4 holds no replica of sized"
    assert all(not e["isFuture"] for b in (1, 2, 3) for e in dirs[b].values())
    # Every replica holds the same bytes, so the same size.
    assert len({dirs[b][n]["size"] for b in (1, 2, 3) for n in ["sized-0"]}) == 1, dirs


def test_unclean_election_when_every_in_sync_replica_is_gone(cluster: LocalCluster) -> None:
    """Replicas [4, 3]: 3 stops (the ISR shrinks to 4), 4 is killed (no leader, ISR [4]),
    3 returns but is not in the ISR; only an UNCLEAN election brings the partition back."""
    bootstrap = _tools(cluster).bootstrap
    _create_topic(bootstrap, "unclean", 1, 2, [[4, 3]])
    _produce(bootstrap, "unclean", 50)
    assert cluster.stop_node(3) == 0
    parts = read_until(lambda: _partitions(bootstrap, "unclean"),
                       lambda ps: ps.get(0, (0, (), ()))[2] == (4,), WAIT_S)
    assert parts.get(0, (0, (), ()))[2] == (4,), (parts, cluster.logs())
    _produce(_tools(cluster, [1, 2]).bootstrap, "unclean", 20)   # only on 4 now
    cluster.kill_node(4)
    bootstrap12 = _tools(cluster, [1, 2]).bootstrap
    wait_until(lambda: _partitions(bootstrap12, "unclean").get(0, (0,))[0] == -1, WAIT_S,
               "unclean-0 to lose its leader")
    cluster.start_node(3)
    # 3 is back and live, but outside the ISR: a clean election cannot pick it.
    wait_until(lambda: 3 in {b.id for b in KafkaAdmin(
        {"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers.values()},
               WAIT_S, "node 3 to be live again")
    assert _partitions(bootstrap, "unclean")[0][0] == -1

    preferred = _tools(cluster).run("kafka-leader-election", "--bootstrap-server", bootstrap,
                                    "--election-type", "PREFERRED", "--topic", "unclean",
                                    "--partition", "0")
    assert preferred.returncode != 0, preferred.describe()
    result = _tools(cluster).run("kafka-leader-election", "--bootstrap-server", bootstrap,
                                 "--election-type", "UNCLEAN", "--topic", "unclean",
                                 "--partition", "0").ok()
    assert "Successfully completed leader election (UNCLEAN) for partitions unclean-0" in \
        result.stdout, result.describe()
    parts = read_until(lambda: _partitions(bootstrap, "unclean"),
                       lambda ps: ps.get(0, (-1,))[0] == 3, WAIT_S)
    assert parts[0][0] == 3 and parts[0][2] == (3,), parts
    _produce(bootstrap, "unclean", 10)   # the partition takes writes again


def test_unregister_refuses_a_broker_with_replicas_then_forgets_an_empty_one(
        cluster: LocalCluster) -> None:
    bootstrap = _tools(cluster).bootstrap
    if not cluster.node(4).alive():
        cluster.start_node(4)
    tools = _tools(cluster)
    refused = tools.run("kafka-cluster", "unregister", "--bootstrap-server", bootstrap,
                        "--id", "4")
    assert refused.returncode != 0, refused.describe()
    assert "unclean-0" in refused.stdout + refused.stderr, refused.describe()

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(["unclean"], request_timeout=15).values():
        future.result()
    wait_until(lambda: "unclean" not in admin.list_topics(timeout=10).topics, WAIT_S,
               "unclean to be deleted")
    assert cluster.stop_node(4) == 0
    tools.run("kafka-cluster", "unregister", "--bootstrap-server", bootstrap, "--id",
              "4").ok()
    # Gone from the image: an assignment naming it is now refused as unknown, not fenced.
    with pytest.raises(Exception, match=r"unknown broker\(s\) \[4\]"):
        _create_topic(bootstrap, "on-four", 1, 1, [[4]])
    again = tools.run("kafka-cluster", "unregister", "--bootstrap-server", bootstrap,
                      "--id", "4")
    assert again.returncode != 0 and "not registered" in again.stdout + again.stderr, \
        again.describe()
    # Every node replayed it, and a restarted node still agrees (log or snapshot replay).
    _restart(cluster, 1, "pref", 3)
    with pytest.raises(Exception, match=r"unknown broker\(s\) \[4\]"):
        _create_topic(_address(cluster, 1), "on-four", 1, 1, [[4]])
