"""A log dir whose writes and fsyncs fail (EIO): Kafka's log-dir-offline behaviour on a real
3-node cluster (tests/faulty_fs.py: node 1's second log dir is a FUSE passthrough that
answers EIO on a switch; device-mapper is not in this kernel).

Node 1 has two log dirs, `bad` on the failing disk and `good` on a plain one; it leads a
partition in each, RF=3, min.insync.replicas=2, idempotent acks=all producers. Once the disk
fails: the failing dir goes offline (all its partitions), node 1 tells the controller
(AssignReplicasToDirs to the LOST dir), leadership of `bad` moves to a healthy replica
while node 1 keeps leading and taking writes for `good`; a Produce to node 1 for `bad` gets
KAFKA_STORAGE_ERROR or NOT_LEADER_OR_FOLLOWER; DescribeLogDirs shows the dir with
KAFKA_STORAGE_ERROR and rillet_log_offline_log_dirs counts it; nothing acknowledged is lost.
After the disk is repaired and node 1 restarted, its replica of `bad` catches up, rejoins the
ISR and ends identical to the others.

A broker whose only log dir fails halts, as Kafka's does: exit code 1, "Shutdown broker
because all log dirs in ... have failed" in its log.
"""
from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest

from rillet.client.admin import AdminClient
from tests.checker import Write, check
from tests.cluster import LocalCluster
from tests.faulty_fs import FaultyDisk, can_make_faulty_disks
from tests.harness import BrokerProcess, free_port
from tests.integration.test_cluster import RACKS, WAIT_S
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_disk_faults import _produce
from tests.integration.test_replication import REPLICATION, _leader_of, _replicated_topic
from tests.polling import read_until, wait_until
from tests.wire import Wire

pytestmark = pytest.mark.skipif(not can_make_faulty_disks(),
                                reason="needs root, /dev/fuse, fusermount3 and mfusepy")

STORAGE_ERROR, NOT_LEADER = 56, 6


def _log_dirs(address: str) -> dict[str, tuple[int, set[str]]]:
    """DescribeLogDirs of one node: log dir -> (error code, topics in it)."""
    with Wire(address, timeout=15) as w:
        resp = w.request(35, 4, {"topics": None})
    return {r.log_dir: (int(r.error_code), {t.name for t in r.topics}) for r in resp.results}


def _offline_gauge(admin: str) -> float:
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("rillet_log_offline_log_dirs "):
                return float(line.split()[1])
    raise AssertionError("no rillet_log_offline_log_dirs in /metrics")


def _produce_code(address: str, topic: str) -> int:
    """The error code of one acks=all Produce straight to the node at `address`."""
    from rillet.records import Record, encode_batch
    batch = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"p", headers=[])])
    with Wire(address, timeout=30) as w:
        resp = w.request(0, 9, {"acks": -1, "timeout": 8000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


def _isr(cluster: LocalCluster, topic: str) -> set[int]:
    with Wire(cluster.node(2).bootstrap, timeout=15) as w:
        resp = w.request(3, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return set(resp.topics[0].partitions[0].isr_nodes)


def test_a_failing_log_dir_goes_offline_and_the_broker_serves_the_other(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes=3, racks=RACKS,
                           extra_config={**REPLICATION, "offsets.topic.num.partitions": 1})
    node = cluster.node(1)
    failing = tmp_path / "failing-disk"
    disk = FaultyDisk(tmp_path / "failing-backing", failing, tmp_path / "failing-switch")
    admin = f"127.0.0.1:{free_port()}"
    # The failing disk first: a new partition goes to the emptiest dir, the first on a tie.
    node.config.update({"log.dirs": f"{failing},{node.data_dir}",
                        "metadata.log.dir": str(tmp_path / "metadata-1"),
                        "admin.http.listener": admin})
    with disk, cluster.start():
        _replicated_topic(cluster, "bad", 1, assignment=[[1, 2, 3]])
        _replicated_topic(cluster, "good", 1, assignment=[[1, 2, 3]])
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (0, {"bad"}), dirs
        assert "good" in dirs[str(node.data_dir)][1], dirs
        acked: dict[str, list[Write]] = {}
        for topic in ("bad", "good"):
            acked[topic], _ = _produce(cluster.bootstrap, 0, 100, 30000, topic=topic)
            assert len(acked[topic]) == 100

        disk.fail()
        more, failed = _produce(cluster.bootstrap, 100, 100, 60000, topic="bad")
        acked["bad"] += more
        print(f"disk failed: {len(more)} acknowledged, {failed} not")
        wait_until(lambda: _leader_of(cluster, "bad", 0) in (2, 3), WAIT_S,
                   "leadership of the failed dir's partition to move")
        wait_until(lambda: 1 not in _isr(cluster, "bad"), WAIT_S,
                   "node 1 to leave the ISR of its offline replica")
        assert _produce_code(node.bootstrap, "bad") in (STORAGE_ERROR, NOT_LEADER)
        dirs = read_until(lambda: _log_dirs(node.bootstrap),
                          lambda d: d[str(failing)][0] != 0, WAIT_S)
        assert dirs[str(failing)] == (STORAGE_ERROR, set()), dirs
        assert dirs[str(node.data_dir)][0] == 0 and "good" in dirs[str(node.data_dir)][1]
        assert _offline_gauge(admin) == 1
        # The other dir goes on: node 1 still leads `good` and takes writes for it.
        assert _leader_of(cluster, "good", 0) == 1
        assert node.alive()
        good, _ = _produce(cluster.bootstrap, 100, 100, 30000, topic="good")
        assert len(good) == 100, "the healthy log dir stopped taking writes"
        acked["good"] += good
        assert len(more) > 0, "the producer never got going again on the new leader"
        for topic in ("bad", "good"):
            report = check(acked[topic], _read_to_end(cluster.bootstrap, topic))
            assert report.ok, f"{topic}: {report.summary()}"

        # Repaired and restarted: the replica catches up and rejoins.
        disk.heal()
        cluster.stop_node(1)
        cluster.start_node(1)
        wait_until(lambda: 1 in _isr(cluster, "bad"), WAIT_S * 2,
                   "node 1 back in the ISR of `bad` after the repair")
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (0, {"bad"}), dirs
        assert _offline_gauge(admin) == 0
        after, _ = _produce(cluster.bootstrap, 200, 50, 30000, topic="bad")
        assert len(after) == 50
        acked["bad"] += after
        report = check(acked["bad"], _read_to_end(cluster.bootstrap, "bad"))
        assert report.ok, report.summary()
        wait_until(lambda: _replicas_identical_dirs(cluster, failing), WAIT_S,
                   "the three replicas of `bad` to be identical")


def _replicas_identical_dirs(cluster: LocalCluster, failing: Path) -> bool:
    """Node 1's `bad` lives on the failing disk, the others' in their data dirs."""
    def log_bytes(directory: Path) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    ours = log_bytes(failing / "bad-0")
    return all(log_bytes(cluster.specs[i - 1].log_dir / "bad-0") == ours for i in (2, 3))


def test_a_broker_whose_every_log_dir_failed_halts(tmp_path: Path) -> None:
    failing = tmp_path / "failing-disk"
    disk = FaultyDisk(tmp_path / "failing-backing", failing, tmp_path / "failing-switch")
    broker = BrokerProcess(tmp_path / "node", config={
        "log.dirs": str(failing), "metadata.log.dir": str(tmp_path / "metadata"),
        "offsets.topic.num.partitions": 1})

    async def create() -> None:
        async with AdminClient(broker.bootstrap, timeout=15) as admin:
            await admin.create_topic("only", 1, 1)

    with disk:
        broker.start()
        try:
            asyncio.run(create())
            assert _produce_code(broker.bootstrap, "only") == 0
            disk.fail()
            try:
                _produce_code(broker.bootstrap, "only")
            except OSError:
                pass   # the broker may halt before it answers
            wait_until(lambda: not broker.alive(), WAIT_S, "the broker to halt")
            assert broker.proc is not None and broker.proc.returncode == 1
            assert f"Shutdown broker because all log dirs in {failing} have failed" \
                in broker.log()
        finally:
            broker.kill()
