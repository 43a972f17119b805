"""Partition reassignment (KIP-455) on a 4-node cluster: Kafka's kafka-reassign-partitions
(--generate, --execute, --verify, --cancel) and rillet's own admin client, under an
idempotent acks=all producer and a consumer group, through a cancel, a kill -9 of the
active controller and a node restart in the middle of a move.

One module-scoped cluster (nodes 1-3 are the voters, 4 a broker only); every test uses its
own topic and leaves every node running. A move is kept in progress deterministically by
SIGSTOPping the broker being added: it cannot fetch, so it never joins the ISR.
"""
from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, Producer

from rillet.client.admin import AdminClient
from rillet.client.admin_topics import Reassignment
from tests.checker import Read, Write, check
from tests.cluster import LocalCluster
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.integration.test_cluster import RACKS, WAIT_S, _address, _partitions
from tests.integration.test_replication import (REPLICATION, AckingProducer, _read_all,
                                                _replicas_identical, _replicated_topic)
from tests.polling import read_until, wait_until

import itertools
_batches = itertools.count()
MOVE_S = 120.0   # a move copies data and waits for ISR changes: generous on a loaded machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("reassign"), nodes=4, racks=(RACKS * 2)[:4],
                     extra_config=REPLICATION)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def all_nodes_running(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every node up (a failed test must not leave one
    paused or dead for the next)."""
    yield
    cluster.restore_all()


def _admin(coro_fn: Any, bootstrap: str) -> Any:
    async def run() -> Any:
        async with AdminClient(bootstrap, timeout=15) as admin:
            return await coro_fn(admin)
    return asyncio.run(run())


def _ongoing_at(bootstrap: str, topic: str | None = None
                ) -> dict[tuple[str, int], Reassignment] | None:
    """ListPartitionReassignments (None while no controller answers)."""
    try:
        found = _admin(lambda a: a.list_partition_reassignments(), bootstrap)
    except Exception:
        return None
    return {tp: r for tp, r in found.items() if topic is None or tp[0] == topic}


def _ongoing(cluster: LocalCluster, topic: str | None = None
             ) -> dict[tuple[str, int], Reassignment] | None:
    return _ongoing_at(cluster.bootstrap, topic)


def _alter_at(bootstrap: str, moves: dict[tuple[str, int], list[int] | None]
              ) -> dict[tuple[str, int], int]:
    return _admin(lambda a: a.alter_partition_reassignments(moves), bootstrap)


def _alter(cluster: LocalCluster, moves: dict[tuple[str, int], list[int] | None]
           ) -> dict[tuple[str, int], int]:
    return _alter_at(cluster.bootstrap, moves)


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> list[Write]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    acked: list[Write] = []
    failed: list[str] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(Write(msg.partition(), msg.key(), msg.value()))
        else:
            failed.append(str(err))

    tag = next(_batches)
    for i in range(count):
        producer.produce(topic, b"b%d-r%05d" % (tag, i), key=b"k%d" % i,
                         partition=i % partitions, on_delivery=done)
    assert producer.flush(60) == 0
    assert not failed and len(acked) == count, failed[:5]
    return acked


def _without(cluster: LocalCluster, *node_ids: int) -> str:
    """A bootstrap list leaving out nodes that are paused (they accept TCP, never answer)."""
    return ",".join(_address(cluster, i) for i in cluster.node_ids if i not in node_ids)


def _replica_dir(cluster: LocalCluster, node_id: int, topic: str, p: int) -> Path:
    return cluster.specs[node_id - 1].log_dir / f"{topic}-{p}"


def _settled(cluster: LocalCluster, topic: str, want: dict[int, list[int]]) -> bool:
    """Every node reports the target replicas and a full ISR, and no move is listed."""
    if _ongoing(cluster, topic) != {}:
        return False
    for node_id in cluster.node_ids:
        parts = _partitions(_address(cluster, node_id), topic)
        for p, replicas in want.items():
            got = parts.get(p)
            if got is None or list(got[1]) != replicas or sorted(got[2]) != sorted(replicas) \
                    or got[0] not in replicas:
                return False
    return True


def _wait_settled(cluster: LocalCluster, topic: str, want: dict[int, list[int]]) -> None:
    wait_until(lambda: _settled(cluster, topic, want), MOVE_S,
               f"{topic} to settle on {want}:\n{_partitions(cluster.bootstrap, topic)}, "
               f"ongoing {_ongoing(cluster, topic)}")


def _wait_gone(cluster: LocalCluster, topic: str, before: dict[int, list[int]],
               after: dict[int, list[int]]) -> None:
    """The replicas a move took away have no partition directory any more; the ones it
    kept or added have one."""
    for p in before:
        for node_id in cluster.node_ids:
            directory = _replica_dir(cluster, node_id, topic, p)
            if node_id in after[p]:
                assert directory.is_dir(), f"node {node_id} lost {directory}"
            elif node_id in before[p]:
                wait_until(lambda: not directory.exists(), WAIT_S,
                           f"node {node_id} to delete {directory}")


# -- Kafka's tool, under load ------------------------------------------------------------------




def _execute(tools: KafkaTools, bootstrap: str, plan_file: Path, *extra: str) -> None:
    executed = tools.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
                         "--execute", "--reassignment-json-file", str(plan_file), *extra).ok()
    assert "Successfully started partition reassignment" in executed.stdout, \
        executed.describe()


def _verify(tools: KafkaTools, bootstrap: str, plan_file: Path, partitions: int,
            preserve_throttles: bool = True) -> str:
    def verify() -> str:
        # Without --preserve-throttles, a --verify that finds the move complete removes the
        # throttle configs --execute --throttle set (IncrementalAlterConfigs on brokers and
        # topics).
        keep = ["--preserve-throttles"] if preserve_throttles else []
        return tools.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
                         "--verify", *keep,
                         "--reassignment-json-file", str(plan_file)).stdout

    out = read_until(verify, lambda o: o.count("is completed") == partitions, MOVE_S,
                     interval=1)
    assert out.count("is completed") == partitions, out
    return out


def _plan_file(tmp_path: Path, topic: str, plan: dict[int, list[int]]) -> Path:
    plan_file = tmp_path / f"{topic}-plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(plan.items())]}))
    return plan_file


THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas",
                 "follower.replication.throttled.replicas")


def _throttle_configs(tools: KafkaTools, topic: str) -> str:
    """The throttle settings Kafka's tool put on broker 1 and on `topic`, as described."""
    out = tools.run("kafka-configs", "--bootstrap-server", tools.bootstrap, "--describe",
                    "--entity-type", "brokers",
                    "--entity-name", "1").ok().stdout
    out += tools.run("kafka-configs", "--bootstrap-server", tools.bootstrap, "--describe",
                     "--entity-type", "topics",
                     "--entity-name", topic).ok().stdout
    return "\n".join(line for line in out.splitlines()
                     if any(f"{key}=" in line for key in THROTTLE_KEYS))


def test_generate_execute_throttled_verify_under_load(cluster: LocalCluster, kafka_jars: Path,
                                                      tmp_path: Path) -> None:
    """Eight partitions RF=3 on brokers 1-3: kafka-reassign-partitions --generate over 1-4,
    --execute --throttle, --verify until done, while an idempotent acks=all producer and a
    consumer group run. The final replica sets are the plan, the removed replicas' files are
    gone, nothing acknowledged is lost or duplicated, and --verify removed the throttle."""
    topic = "moving"
    original = {p: [1 + (p + i) % 3 for i in range(3)] for p in range(8)}
    _replicated_topic(cluster, topic, 8, assignment=[original[p] for p in range(8)])
    tools = KafkaTools(cluster.bootstrap)
    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = tools.run("kafka-reassign-partitions", "--bootstrap-server", cluster.bootstrap,
                          "--generate", "--topics-to-move-json-file", str(to_move),
                          "--broker-list", "1,2,3,4").ok()
    current_json, proposed_json = [line for line in generated.lines if line.startswith("{")]
    assert {p["partition"]: p["replicas"] for p in json.loads(current_json)["partitions"]} \
        == original, generated.describe()
    plan = {p["partition"]: p["replicas"] for p in json.loads(proposed_json)["partitions"]}
    assert sorted(plan) == list(range(8)) and any(4 in r for r in plan.values()), plan
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proposed_json)

    producer = AckingProducer(cluster.bootstrap, topic).start()
    observed: list[Read] = []
    consumer_errors: list[str] = []
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "movers",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if not msg.error().retriable():
                        consumer_errors.append(str(msg.error()))
                    continue
                observed.append(Read(msg.partition(), msg.offset(), msg.key(), msg.value()))
        finally:
            consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    try:
        wait_until(lambda: len(producer.acked) > 1500 and len(observed) > 500, WAIT_S,
                   "records flowing before the move")
        _execute(tools, cluster.bootstrap, plan_file, "--throttle", "50000000")
        set_throttles = _throttle_configs(tools, topic)
        assert "leader.replication.throttled.rate=50000000" in set_throttles, set_throttles
        assert "follower.replication.throttled.replicas=" in set_throttles, set_throttles
        verified = _verify(tools, cluster.bootstrap, plan_file, 8, preserve_throttles=False)
        acked_at_end = len(producer.acked)
        wait_until(lambda: len(producer.acked) > acked_at_end + 1000, WAIT_S,
                   "the producer to carry on after the move")
    finally:
        producer.stop()
        stop.set()
        reader.join(60)
    assert not producer.errors, producer.errors[:5]
    assert not consumer_errors, consumer_errors[:5]
    _wait_settled(cluster, topic, plan)
    _wait_gone(cluster, topic, original, plan)
    final = _read_all(cluster.bootstrap, topic, 8, len(producer.acked))
    report = check(producer.acked, final)
    assert report.ok, report.summary()
    by_offset = {(r.partition, r.offset): r.value for r in final}
    lost_reads = [r for r in observed if by_offset.get((r.partition, r.offset)) != r.value]
    assert not lost_reads, f"read during the move, then lost: {lost_reads[:5]}"
    for p, replicas in plan.items():
        wait_until(lambda: _replicas_identical(cluster, topic, p, replicas), WAIT_S,
                   f"the replicas of {topic}-{p} to be byte-identical")
    assert _throttle_configs(tools, topic) == "", f"--verify left throttles behind:\n{verified}"


# -- cancel -------------------------------------------------------------------------------------


def test_cancel_mid_move_reverts_to_the_original_replicas(cluster: LocalCluster,
                                                          kafka_jars: Path,
                                                          tmp_path: Path) -> None:
    topic = "cancelled"
    original = {0: [1, 2, 3], 1: [2, 3, 1]}
    _replicated_topic(cluster, topic, 2, assignment=[original[0], original[1]])
    acked = _produce(cluster.bootstrap, topic, 2, 200)
    target = {0: [4, 2, 3], 1: [2, 4, 3]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in target.items()]}))
    tools = KafkaTools(cluster.bootstrap)
    cluster.pause_node(4)
    others = _without(cluster, 4)
    assert _alter_at(others, {(topic, p): r for p, r in target.items()}) == {
        (topic, 0): 0, (topic, 1): 0}
    ongoing = read_until(lambda: _ongoing_at(others, topic), lambda o: o is not None and
                         len(o) == 2, WAIT_S)
    assert ongoing == {(topic, 0): Reassignment((4, 2, 3, 1), (4,), (1,)),
                       (topic, 1): Reassignment((2, 4, 3, 1), (4,), (1,))}, ongoing
    # Metadata shows the union of old and new replicas while the move runs, as Kafka does.
    for node_id in (1, 2, 3):
        parts = read_until(lambda: _partitions(_address(cluster, node_id), topic),
                           lambda ps: ps.get(0, (0, ()))[1] == (4, 2, 3, 1), WAIT_S)
        assert parts[0][1] == (4, 2, 3, 1) and 4 not in parts[0][2], (node_id, parts)
    # acks=all keeps working: the adding replica is not in the ISR, so it holds nothing back.
    acked += _produce(others, topic, 2, 100)
    cancelled = tools.run("kafka-reassign-partitions", "--bootstrap-server", others,
                          "--cancel", "--preserve-throttles",
                          "--reassignment-json-file", str(plan_file)).ok()
    assert "Successfully cancelled" in cancelled.stdout, cancelled.describe()
    for node_id in (1, 2, 3):
        wait_until(lambda: {p: sorted(r) for p, (_, r, _) in
                            _partitions(_address(cluster, node_id), topic).items()}
                   == {0: [1, 2, 3], 1: [1, 2, 3]}, WAIT_S,
                   f"node {node_id} to see the original replicas back")
    assert _ongoing_at(others, topic) == {}
    # A second cancel has nothing to cancel.
    assert _alter_at(others, {(topic, 0): None}) == {(topic, 0): 85}
    cluster.resume_node(4)
    cluster.wait_ready()
    for p in original:
        wait_until(lambda: not _replica_dir(cluster, 4, topic, p).exists(), WAIT_S,
                   f"node 4 to have no replica of {topic}-{p}")
        wait_until(lambda: sorted(_partitions(cluster.bootstrap, topic)[p][2]) == [1, 2, 3],
                   WAIT_S, f"the ISR of {topic}-{p} to be full")
    report = check(acked, _read_all(cluster.bootstrap, topic, 2, len(acked)))
    assert report.ok, report.summary()


def test_invalid_moves_are_refused_per_partition(cluster: LocalCluster) -> None:
    topic = "refusals"
    _replicated_topic(cluster, topic, 1, assignment=[[1, 2, 3]])
    result = _alter(cluster, {(topic, 0): [1, 1, 2], (topic, 5): [1, 2, 3],
                              ("no-such-topic", 0): [1, 2, 3]})
    assert result == {(topic, 0): 39, (topic, 5): 3, ("no-such-topic", 0): 3}
    assert _alter(cluster, {(topic, 0): [1, 2, 99]}) == {(topic, 0): 39}
    assert _alter(cluster, {(topic, 0): []}) == {(topic, 0): 39}
    # To the current replicas: a successful no-op.
    assert _alter(cluster, {(topic, 0): [1, 2, 3]}) == {(topic, 0): 0}
    assert _ongoing(cluster, topic) == {}


# -- failures in the middle of a move -----------------------------------------------------------


def _active_controller(cluster: LocalCluster) -> int:
    quorum = read_until(lambda: _quorum(cluster), lambda q: q is not None and q > 0, WAIT_S)
    assert quorum is not None and quorum > 0
    return quorum


def _quorum(cluster: LocalCluster) -> int | None:
    try:
        return _admin(lambda a: a.describe_quorum(), cluster.bootstrap).leader_id
    except Exception:
        return None


def test_a_move_survives_a_killed_controller(cluster: LocalCluster) -> None:
    topic = "failover"
    controller = _active_controller(cluster)
    original = [1, 2, 3]
    target = [4] + [b for b in original if b != controller]   # the controller's replica leaves
    _replicated_topic(cluster, topic, 1, assignment=[original])
    acked = _produce(cluster.bootstrap, topic, 1, 300)
    cluster.pause_node(4)
    assert _alter(cluster, {(topic, 0): target}) == {(topic, 0): 0}
    wait_until(lambda: (_ongoing(cluster, topic) or {}).get((topic, 0)) is not None, WAIT_S,
               "the move to be listed")
    cluster.kill_node(controller)
    survivors = ",".join(_address(cluster, i) for i in cluster.node_ids
                         if i not in (controller, 4))
    wait_until(lambda: _quorum_at(survivors) not in (None, -1, controller), WAIT_S,
               "a new active controller")
    # The new controller knows the move from the metadata log.
    listed = read_until(lambda: _ongoing_at(survivors), lambda o: o is not None, WAIT_S)
    assert (listed or {}).get((topic, 0)) == Reassignment(
        tuple(target) + (controller,), (4,), (controller,)), listed
    cluster.resume_node(4)
    wait_until(lambda: _ongoing_at(survivors) == {}, MOVE_S, "the move to complete")
    for node_id in [i for i in cluster.node_ids if i != controller]:
        wait_until(lambda: _partitions(_address(cluster, node_id), topic).get(0, (0, (), ()))[1]
                   == tuple(target), WAIT_S, f"node {node_id} to see the target replicas")
    wait_until(lambda: sorted(_partitions(survivors, topic)[0][2]) == sorted(target), WAIT_S,
               "a full ISR")
    acked += _produce(survivors, topic, 1, 100)
    # The killed node comes back: its replica was moved away while it was down.
    cluster.start_node(controller)
    wait_until(lambda: not _replica_dir(cluster, controller, topic, 0).exists(), WAIT_S,
               f"node {controller} to delete its stray replica at start-up")
    _wait_settled(cluster, topic, {0: target})
    report = check(acked, _read_all(cluster.bootstrap, topic, 1, len(acked)))
    assert report.ok, report.summary()
    wait_until(lambda: _replicas_identical(cluster, topic, 0, target), WAIT_S,
               "the target replicas to be byte-identical")


def _quorum_at(bootstrap: str) -> int | None:
    try:
        return _admin(lambda a: a.describe_quorum(), bootstrap).leader_id
    except Exception:
        return None


def test_a_move_survives_a_restart_of_the_node_being_added(cluster: LocalCluster) -> None:
    topic = "restarted"
    original = [2, 3, 1]
    target = [2, 4, 3]
    _replicated_topic(cluster, topic, 1, assignment=[original])
    acked = _produce(cluster.bootstrap, topic, 1, 300)
    cluster.pause_node(4)
    assert _alter(cluster, {(topic, 0): target}) == {(topic, 0): 0}
    wait_until(lambda: (_ongoing(cluster, topic) or {}).get((topic, 0)) is not None, WAIT_S,
               "the move to be listed")
    cluster.kill_node(4)          # kill -9 while stopped: whatever it had is what it restarts with
    acked += _produce(cluster.bootstrap, topic, 1, 100)
    cluster.start_node(4)
    _wait_settled(cluster, topic, {0: target})
    _wait_gone(cluster, topic, {0: original}, {0: target})
    report = check(acked, _read_all(cluster.bootstrap, topic, 1, len(acked)))
    assert report.ok, report.summary()
    wait_until(lambda: _replicas_identical(cluster, topic, 0, target), WAIT_S,
               "the target replicas to be byte-identical")


def test_a_move_survives_a_restart_of_a_staying_leader(cluster: LocalCluster) -> None:
    """kill -9 and restart of the leader, which stays a replica (a SIGTERM would do, but a
    node that is also the active controller keeps deciding while its listeners close on
    the way down, which is not this test's subject)."""
    topic = "leader-restart"
    original = [3, 1, 2]
    target = [3, 4, 1]
    _replicated_topic(cluster, topic, 1, assignment=[original])
    acked = _produce(cluster.bootstrap, topic, 1, 300)
    cluster.pause_node(4)
    assert _alter(cluster, {(topic, 0): target}) == {(topic, 0): 0}
    cluster.kill_node(3)
    cluster.resume_node(4)
    acked += _produce(",".join(_address(cluster, i) for i in (1, 2)), topic, 1, 100)
    cluster.start_node(3)
    _wait_settled(cluster, topic, {0: target})
    _wait_gone(cluster, topic, {0: original}, {0: target})
    report = check(acked, _read_all(cluster.bootstrap, topic, 1, len(acked)))
    assert report.ok, report.summary()

