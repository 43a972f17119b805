"""Three rillet nodes as one cluster: Raft metadata quorum, registration, fencing, failover.

Real processes on loopback (tests/cluster.py), real clients (confluent-kafka, rillet's own
admin client) and Kafka's own tools. Read-only checks share one cluster; each failure
scenario gets a cluster of its own.
"""
from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

from rillet.client.admin import AdminClient
from tests.cluster import LocalCluster
from rillet.local_cluster import serve_command
from tests.harness import free_port
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.polling import read_until, wait_until

RACKS = ["zone-a", "zone-b", "zone-c"]
# Short enough that fencing happens within a test, long enough for a loaded CI machine.
FAST_FENCING = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500}
WAIT_S = 60.0


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _describe_quorum(bootstrap: str) -> Any:
    async with AdminClient(bootstrap, timeout=10) as admin:
        return await admin.describe_quorum()


async def _describe_cluster(bootstrap: str) -> Any:
    async with AdminClient(bootstrap, timeout=10) as admin:
        return await admin.describe_cluster()


def _quorum(bootstrap: str) -> Any:
    try:
        return _run(_describe_quorum(bootstrap))
    except Exception:
        return None


def _metadata(bootstrap: str, topic: str | None = None) -> Any:
    return KafkaAdmin({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10)


def _partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, tuple[int, ...],
                                                               tuple[int, ...]]]:
    """partition -> (leader, replicas, isr), as one node reports it ({} if none answers)."""
    try:
        md = _metadata(bootstrap, topic)
    except Exception:
        return {}
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}


def _create_topic(bootstrap: str, name: str, partitions: int, rf: int,
                  assignment: list[list[int]] | None = None) -> None:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, rf) if assignment is None else \
        NewTopic(name, len(assignment), replica_assignment=assignment)
    for future in admin.create_topics([topic], request_timeout=15).values():
        future.result()


def _try_create(bootstrap: str, name: str) -> bool:
    try:
        _create_topic(bootstrap, name, 1, 1)
        return True
    except Exception:
        return False


def _leader(cluster: LocalCluster, among: list[int] | None = None) -> int:
    nodes = among or cluster.node_ids
    bootstrap = ",".join(cluster.specs[i - 1].client_address for i in nodes)
    quorum = read_until(lambda: _quorum(bootstrap),
                        lambda q: q is not None and q.leader_id in nodes, WAIT_S)
    assert quorum is not None and quorum.leader_id in nodes, cluster.logs()
    return quorum.leader_id


def _address(cluster: LocalCluster, node_id: int) -> str:
    return cluster.specs[node_id - 1].client_address


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), nodes=3, racks=RACKS,
                     extra_config=FAST_FENCING)
    try:
        c.start()
        yield c
    finally:
        c.close()


def _fresh(tmp_path: Path, **config: Any) -> LocalCluster:
    return LocalCluster(tmp_path, nodes=3, racks=RACKS, extra_config={**FAST_FENCING, **config})


# -- one shared cluster ---------------------------------------------------------------------


def test_every_node_reports_the_same_cluster(cluster: LocalCluster) -> None:
    """Brokers with racks, the active controller, and a topic created through one node
    visible with the same leaders through every node."""
    _create_topic(_address(cluster, 1), "shared", 6, 3)
    views = {}
    for node_id in cluster.node_ids:
        address = _address(cluster, node_id)
        views[node_id] = read_until(lambda: _partitions(address, "shared"),
                                    lambda p: len(p) == 6, WAIT_S)
        described = _run(_describe_cluster(address))
        assert described.cluster_id == cluster.cluster_id
        assert {b: rack for b, (_, _, rack) in described.brokers.items()} == \
            {1: "zone-a", 2: "zone-b", 3: "zone-c"}
        assert described.controller_id == _leader(cluster)
    assert views[1] == views[2] == views[3], views
    for leader, replicas, isr in views[1].values():
        assert sorted(replicas) == [1, 2, 3] and leader == replicas[0] and set(isr) == {1, 2, 3}
    # Leadership is spread: every broker leads two of the six partitions.
    leaders = [leader for leader, _, _ in views[1].values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]


def test_clients_produce_and_consume_through_any_node(cluster: LocalCluster) -> None:
    _create_topic(_address(cluster, 2), "traffic", 3, 3)
    for node_id in cluster.node_ids:
        wait_until(lambda: len(_partitions(_address(cluster, node_id), "traffic")) == 3,
                   WAIT_S, f"node {node_id} to know topic traffic")
    producer = Producer({"bootstrap.servers": _address(cluster, 3), "acks": "all",
                         "enable.idempotence": True})
    sent = [f"m{i}".encode() for i in range(60)]
    for value in sent:
        producer.produce("traffic", value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": _address(cluster, 1), "group.id": "g-traffic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["traffic"])
    got: list[bytes] = []
    try:
        def poll() -> list[bytes]:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            return got
        read_until(poll, lambda g: len(g) >= len(sent), WAIT_S, interval=0)
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


def run_tool(tool: str, *args: str) -> Any:
    return KafkaTools("").run(tool, *args)


def test_producer_ids_are_unique_across_nodes(cluster: LocalCluster) -> None:
    """InitProducerId through every node: ids come from blocks the controller records, so
    idempotent producers on different brokers never share one."""
    from rillet.client.connection import BrokerConnection

    async def ids(address: str) -> list[int]:
        host, port = address.rsplit(":", 1)
        conn = BrokerConnection(host, int(port), timeout=30)
        try:
            out = []
            for _ in range(3):
                resp = await conn.request(22, 4, {"transactional_id": None,
                                                  "transaction_timeout": 60000,
                                                  "producer_id": -1, "producer_epoch": -1})
                assert int(resp.error_code) == 0
                out.append(resp.producer_id)
            return out
        finally:
            await conn.close()

    seen = [pid for node_id in cluster.node_ids for pid in _run(ids(_address(cluster, node_id)))]
    assert len(set(seen)) == len(seen) == 9, seen


def test_kafka_tools_see_a_kafka_cluster(cluster: LocalCluster, kafka_jars: Path) -> None:
    leader = _leader(cluster)
    status = run_tool("kafka-metadata-quorum", "--bootstrap-server", _address(cluster, 1),
                      "describe", "--status").ok()
    fields = dict(line.split(":", 1) for line in status.lines if ":" in line)
    assert fields["ClusterId"].strip() == cluster.cluster_id
    assert int(fields["LeaderId"]) == leader
    assert all(f'"id": {i}' in fields["CurrentVoters"] for i in (1, 2, 3)), status.describe()
    replication = run_tool("kafka-metadata-quorum", "--bootstrap-server", _address(cluster, 2),
                           "describe", "--replication").ok()
    rows = [line.split() for line in replication.lines[1:]]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3], replication.describe()
    assert [r[-1] for r in rows if int(r[0]) == leader] == ["Leader"]
    run_tool("kafka-topics", "--bootstrap-server", _address(cluster, 3), "--create",
             "--topic", "by-java", "--partitions", "3", "--replication-factor", "3").ok()
    described = read_until(
        lambda: run_tool("kafka-topics", "--bootstrap-server", _address(cluster, 1),
                         "--describe", "--topic", "by-java"),
        lambda r: r.returncode == 0 and "ReplicationFactor: 3" in r.stdout, WAIT_S)
    assert described.stdout.count("Partition:") == 3, described.describe()
    cluster_id = run_tool("kafka-cluster", "cluster-id", "--bootstrap-server",
                          _address(cluster, 2)).ok()
    assert cluster_id.stdout.strip() == f"Cluster ID: {cluster.cluster_id}"


def test_a_broker_only_node_observes_the_quorum(tmp_path: Path) -> None:
    """A fourth node (process.roles=broker) is no voter: it follows the metadata log as an
    observer, registers, and serves partitions like any broker."""
    with LocalCluster(tmp_path, nodes=4, racks=RACKS + ["zone-a"],
                      extra_config=FAST_FENCING).start() as cluster:
        assert "process.roles=broker" in " ".join(cluster.node(4).command())
        quorum = read_until(lambda: _quorum(cluster.bootstrap),
                            lambda q: q is not None and 4 in q.observers, WAIT_S)
        assert sorted(quorum.voters) == [1, 2, 3] and 4 in quorum.observers, quorum
        _create_topic(_address(cluster, 4), "four", 4, 1)
        parts = read_until(lambda: _partitions(_address(cluster, 4), "four"),
                           lambda p: len(p) == 4, WAIT_S)
        assert sorted(leader for leader, _, _ in parts.values()) == [1, 2, 3, 4]


# -- failures, each on a cluster of its own ----------------------------------------------------


def test_killed_controller_is_replaced_and_rejoins(tmp_path: Path) -> None:
    with _fresh(tmp_path).start() as cluster:
        old = _leader(cluster)
        old_epoch = _quorum(cluster.bootstrap).epoch
        cluster.kill_node(old)
        survivors = [i for i in cluster.node_ids if i != old]
        survivors_bootstrap = ",".join(_address(cluster, i) for i in survivors)
        new = _leader(cluster, survivors)
        assert new != old and _quorum(survivors_bootstrap).epoch > old_epoch
        wait_until(lambda: _try_create(survivors_bootstrap, "after-failover"), WAIT_S,
                   "topic creation through the survivors")
        cluster.start_node(old)
        wait_until(lambda: len(_partitions(_address(cluster, old), "after-failover")) == 1,
                   WAIT_S, f"node {old} to replay what it missed")
        quorum = read_until(lambda: _quorum(cluster.bootstrap),
                            lambda q: q is not None and len(set(q.voters.values())) == 1,
                            WAIT_S)
        assert quorum is not None and len(set(quorum.voters.values())) == 1, quorum


def test_a_fenced_broker_loses_its_leaderships_and_gets_them_back(tmp_path: Path) -> None:
    with _fresh(tmp_path).start() as cluster:
        controller = _leader(cluster)
        victim = next(i for i in cluster.node_ids if i != controller)
        others = [i for i in cluster.node_ids if i != victim]
        bootstrap = _address(cluster, controller)
        _create_topic(bootstrap, "replicated", 3, 3)
        _create_topic(bootstrap, "single", 1, 1, assignment=[[victim]])
        wait_until(lambda: len(_partitions(bootstrap, "single")) == 1, WAIT_S, "topics")
        # Any node may answer Metadata, each once it has applied the creation.
        before = read_until(lambda: _partitions(bootstrap, "replicated"),
                            lambda ps: len(ps) == 3, WAIT_S)
        led = [p for p, (leader, _, _) in before.items() if leader == victim]
        assert led, before
        cluster.kill_node(victim)
        # No heartbeat for broker.session.timeout.ms: fenced, gone from Metadata.
        wait_until(lambda: victim not in _metadata(bootstrap).brokers, WAIT_S,
                   f"broker {victim} to be fenced")
        after = read_until(lambda: _partitions(bootstrap, "replicated"),
                           lambda ps: all(ps.get(p, (-1,))[0] in others for p in led), WAIT_S)
        for p in led:
            leader, _, isr = after[p]
            assert leader in others and victim not in isr, after
        # Its only replica is gone: no leader until it returns (no unclean election).
        wait_until(lambda: _partitions(bootstrap, "single").get(0, (0,))[0] == -1, WAIT_S,
                   "the single-replica partition to lose its leader")
        cluster.start_node(victim)
        wait_until(lambda: _partitions(bootstrap, "single").get(0, (-1,))[0] == victim,
                   WAIT_S, "the single-replica partition to get its leader back")


def test_controlled_shutdown_moves_leaderships_before_stopping(tmp_path: Path) -> None:
    # A session long enough that only the controlled shutdown can explain the move.
    with _fresh(tmp_path, **{"broker.session.timeout.ms": 120000}).start() as cluster:
        controller = _leader(cluster)
        victim = next(i for i in cluster.node_ids if i != controller)
        bootstrap = _address(cluster, controller)
        _create_topic(bootstrap, "moving", 3, 3)
        # Any node may answer Metadata, each once it has applied the creation.
        before = read_until(lambda: _partitions(bootstrap, "moving"), lambda ps: len(ps) == 3,
                            WAIT_S)
        assert any(leader == victim for leader, _, _ in before.values()), before
        assert cluster.stop_node(victim) == 0
        # Well within the session timeout: only the controlled shutdown can have done it
        # (each node applies the change in its own time, hence the bounded wait).
        after = read_until(lambda: _partitions(bootstrap, "moving"),
                           lambda ps: len(ps) == 3 and all(leader not in (victim, -1)
                                                           for leader, _, _ in ps.values()),
                           WAIT_S)
        assert len(after) == 3 and all(leader not in (victim, -1)
                                       for leader, _, _ in after.values()), after
        assert "fenced (controlled shutdown)" in cluster.node(controller).log()


def test_a_node_away_past_a_snapshot_catches_up_from_it(tmp_path: Path) -> None:
    """The leader snapshots its image and drops the log the snapshot covers; a node that
    was down meanwhile cannot fetch that log and loads the snapshot instead."""
    small = {"metadata.log.max.record.bytes.between.snapshots": 4096}
    with _fresh(tmp_path, **small).start() as cluster:
        leader = _leader(cluster)
        away = next(i for i in cluster.node_ids if i != leader)
        cluster.kill_node(away)
        others = ",".join(_address(cluster, i) for i in cluster.node_ids if i != away)
        names = [f"while-away-{i}" for i in range(40)]
        for name in names:
            _create_topic(others, name, 1, 1)
        snapshots = cluster.specs[leader - 1].log_dir / "__metadata" / "snapshots"
        wait_until(lambda: any(snapshots.glob("*.checkpoint")), WAIT_S, "a snapshot")
        cluster.start_node(away)
        address = _address(cluster, away)
        wait_until(lambda: set(names) <= set(_metadata(address).topics), WAIT_S,
                   f"node {away} to know every topic")
        assert "installed the leader's metadata snapshot" in cluster.node(away).log()


def test_controller_leaving_hands_over_quickly(tmp_path: Path) -> None:
    """SIGTERM of the active controller: it resigns (EndQuorumEpoch), a successor is elected
    and the cluster keeps taking metadata changes."""
    with _fresh(tmp_path).start() as cluster:
        old = _leader(cluster)
        assert cluster.stop_node(old) == 0
        survivors = [i for i in cluster.node_ids if i != old]
        assert _leader(cluster, survivors) != old
        wait_until(lambda: _try_create(",".join(_address(cluster, i) for i in survivors),
                                       "after-handover"), WAIT_S, "topic creation")
        assert "leaderships moved" in cluster.node(old).log()


# -- what is refused --------------------------------------------------------------------------


def _serve(tmp_path: Path, **settings: Any) -> subprocess.CompletedProcess[str]:
    cmd = serve_command({"log.dirs": str(tmp_path / "data"), **settings})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("voters,expected", [
    ("2@127.0.0.1:{c}", "does not name this node"),
    ("1@127.0.0.1:{c},1@127.0.0.1:{o}", "names node 1 twice"),
    ("1@127.0.0.1", "expected id@host:port"),
    ("one@127.0.0.1:{c}", "expected id@host:port"),
    ("1@127.0.0.1:{o}", "but its CONTROLLER listener is"),
])
def test_an_inconsistent_quorum_config_stops_start_up(tmp_path: Path, voters: str,
                                                      expected: str) -> None:
    client, controller, other = free_port(), free_port(), free_port()
    result = _serve(tmp_path, **{
        "node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:{client},"
                                   f"CONTROLLER://127.0.0.1:{controller}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": voters.format(c=controller, o=other),
        "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"})
    assert result.returncode == 2, result.stderr
    assert "controller.quorum.voters" in result.stderr and expected in result.stderr, \
        result.stderr
    assert "Traceback" not in result.stderr


def test_a_multi_node_quorum_needs_a_cluster_id(tmp_path: Path) -> None:
    client, controller = free_port(), free_port()
    result = _serve(tmp_path, **{
        "node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:{client},"
                                   f"CONTROLLER://127.0.0.1:{controller}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller},2@127.0.0.1:{free_port()}"})
    assert result.returncode == 2 and "cluster.id must be set" in result.stderr, result.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_a_node_of_another_cluster_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    """A broker-only node with a foreign cluster id fetching from our quorum: every voter it
    reaches refuses it and says so in its log; it never joins."""
    voters = ",".join(f"{s.node_id}@{s.controller_address}" for s in cluster.specs)
    client = free_port()
    foreign = str(uuid.UUID(int=1)).replace("-", "")[:22]
    proc = subprocess.Popen(serve_command({
        "node.id": 9, "process.roles": "broker", "log.dirs": str(tmp_path / "foreign"),
        "listeners": f"PLAINTEXT://127.0.0.1:{client}", "controller.listener.names":
        "CONTROLLER", "controller.quorum.voters": voters, "cluster.id": foreign}),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(f"cluster id {foreign} is not ours" in cluster.node(i).log()
                               for i in cluster.node_ids), WAIT_S, "the refusal in a log")
        assert 9 not in _run(_describe_cluster(cluster.bootstrap)).brokers
    finally:
        proc.kill()
        proc.wait(10)
