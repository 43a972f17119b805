"""Which log dir holds each replica (KIP-858), on real 3-node clusters with a FUSE disk that
fails on demand (tests/faulty_fs.py): node 1 has two log dirs, `failing` on that disk (the
first, so a new partition lands there on a tie) and its plain data dir.

- F1, a log dir unreadable at start-up: node 1 restarted with its disk dead (every read,
  lookup and listing there gets EIO; or all but its top-level files, so it locks and reads
  its meta.properties but cannot list its partitions) starts, serves its other dir, reports the dead dir
  offline (DescribeLogDirs KAFKA_STORAGE_ERROR, rillet_log_offline_log_dirs 1) and never
  makes its replicas again, empty, in the other dir: they stay offline and out of the ISR.
  Repaired and restarted, its replica is the one it had, caught up and back in the ISR.
- F6, a log dir failing at run time: the controller never names node 1 leader of a
  partition whose replica is on the lost dir, not even by a preferred election where node 1
  is the preferred replica and the only in-sync one, nor lets it back into an ISR; node 1
  keeps leading what its other dir holds; the active controller restarted, the same holds
  (it is in the metadata log). Repaired and restarted, node 1 leads again the
  partition it was the only in-sync replica of, with every acknowledged record.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.checker import Write, check
from tests.cluster import LocalCluster
from tests.faulty_fs import FaultyDisk, can_make_faulty_disks
from tests.harness import BrokerProcess, free_port
from tests.integration.test_cluster import RACKS, WAIT_S
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_disk_faults import _produce
from tests.integration.test_log_dir_failure import _log_dirs, _offline_gauge
from tests.integration.test_replication import REPLICATION, _replicated_topic
from tests.polling import wait_until
from tests.wire import Wire

pytestmark = pytest.mark.skipif(not can_make_faulty_disks(),
                                reason="needs root, /dev/fuse, fusermount3 and mfusepy")

STORAGE_ERROR, PREFERRED_LEADER_NOT_AVAILABLE = 56, 80


def _state(node: BrokerProcess, topic: str) -> tuple[int, set[int]]:
    """(leader, ISR) of partition 0 of `topic`, as `node` sees it."""
    with Wire(node.bootstrap, timeout=15) as w:
        resp = w.request(3, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    part = resp.topics[0].partitions[0]
    return int(part.leader_id), set(part.isr_nodes)


def _controller_id(node: BrokerProcess) -> int:
    with Wire(node.bootstrap, timeout=15) as w:
        return int(w.request(3, 7, {"topics": [], "allow_auto_topic_creation": False})
                   .controller_id)


def _elect_preferred(node: BrokerProcess, topic: str) -> int:
    """A preferred leader election of `topic`-0 through `node`; its error code."""
    with Wire(node.bootstrap, timeout=30) as w:
        resp = w.request(43, 1, {"election_type": 0, "timeout_ms": 10000,
                                 "topic_partitions": [{"topic": topic, "partitions": [0]}]})
    return int(resp.replica_election_results[0].partition_result[0].error_code)


def _log_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[LocalCluster, FaultyDisk, Path, str]]:
    """The cluster (not started) and node 1's failing disk (mounted), its mount point and
    node 1's admin address."""
    cluster = LocalCluster(tmp_path, nodes=3, racks=RACKS,
                           extra_config={**REPLICATION, "offsets.topic.num.partitions": 1})
    failing = tmp_path / "failing-disk"
    disk = FaultyDisk(tmp_path / "failing-backing", failing, tmp_path / "failing-switch")
    admin = f"127.0.0.1:{free_port()}"
    cluster.node(1).config.update({"log.dirs": f"{failing},{cluster.node(1).data_dir}",
                                   "metadata.log.dir": str(tmp_path / "metadata-1"),
                                   "admin.http.listener": admin})
    with disk:
        try:
            yield cluster, disk, failing, admin
        finally:
            disk.heal()   # the mount root answers again, so it unmounts cleanly


@pytest.mark.parametrize("top_files", [False, True], ids=["dead", "unlistable"])
def test_a_log_dir_unreadable_at_start_keeps_its_replicas_offline_not_recreated(
        setup: tuple[LocalCluster, FaultyDisk, Path, str], top_files: bool) -> None:
    _unreadable_at_start(*setup, top_files)


def _unreadable_at_start(cluster: LocalCluster, disk: FaultyDisk, failing: Path, admin: str,
                         top_files: bool) -> None:
    node = cluster.node(1)
    with cluster.start():
        _replicated_topic(cluster, "bad", 1, assignment=[[2, 1, 3]])
        _replicated_topic(cluster, "good", 1, assignment=[[2, 1, 3]])
        assert _log_dirs(node.bootstrap)[str(failing)] == (0, {"bad"})
        acked: dict[str, list[Write]] = {}
        for topic in ("bad", "good"):
            acked[topic], _ = _produce(cluster.bootstrap, 0, 100, 30000, topic=topic)
            assert len(acked[topic]) == 100
        wait_until(lambda: _state(node, "bad")[1] == {1, 2, 3}, WAIT_S, "a full ISR")
        replica = failing / "bad-0"
        before = _log_bytes(replica)
        assert before, "node 1's replica of `bad` holds nothing"

        cluster.stop_node(1)
        disk.fail(reads=True, top_files=top_files)
        cluster.start_node(1)
        # Node 1 serves its other dir: its replica of `good` is back in sync ...
        wait_until(lambda: 1 in _state(cluster.node(3), "good")[1], WAIT_S,
                   "node 1 back in the ISR of `good`")
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (STORAGE_ERROR, set()), dirs
        assert _offline_gauge(admin) == 1
        # ... while its replica of `bad` was made nowhere else and stays out of the ISR.
        assert "bad" not in dirs[str(node.data_dir)][1], dirs
        assert not (node.data_dir / "bad-0").exists()
        assert 1 not in _state(cluster.node(3), "bad")[1]
        more, _ = _produce(cluster.bootstrap, 100, 50, 30000, topic="bad")
        assert len(more) == 50
        acked["bad"] += more
        assert 1 not in _state(cluster.node(3), "bad")[1]
        assert not (node.data_dir / "bad-0").exists()

        # The disk repaired: the replica it had comes back, catches up and rejoins.
        disk.heal()
        cluster.stop_node(1)
        cluster.start_node(1)
        wait_until(lambda: 1 in _state(cluster.node(3), "bad")[1], WAIT_S * 2,
                   "node 1 back in the ISR of `bad` after the repair")
        assert _log_dirs(node.bootstrap)[str(failing)] == (0, {"bad"})
        assert _offline_gauge(admin) == 0
        assert _log_bytes(replica).startswith(before), "the replica's data changed"
        assert not (node.data_dir / "bad-0").exists()
        report = check(acked["bad"], _read_to_end(cluster.bootstrap, "bad"))
        assert report.ok, report.summary()


def test_a_replica_on_a_lost_log_dir_is_never_elected_nor_in_sync_again(
        setup: tuple[LocalCluster, FaultyDisk, Path, str]) -> None:
    cluster, disk, failing, admin = setup
    node, witness = cluster.node(1), cluster.node(3)
    with cluster.start():
        # In creation order: `bad` on the failing disk (a tie: the first dir), `good` on
        # the data dir (the emptier), `shared` on the failing disk (a tie again).
        _replicated_topic(cluster, "bad", 1, assignment=[[1, 2]])
        _replicated_topic(cluster, "good", 1, assignment=[[1, 3]])
        _replicated_topic(cluster, "shared", 1, assignment=[[1, 3, 2]])
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (0, {"bad", "shared"}), dirs
        acked: dict[str, list[Write]] = {}
        for topic in ("bad", "good", "shared"):
            acked[topic], _ = _produce(cluster.bootstrap, 0, 50, 30000, topic=topic)
            assert len(acked[topic]) == 50

        # Node 1 becomes the only in-sync replica of `bad` (node 2 stops) ...
        cluster.stop_node(2)
        wait_until(lambda: _state(witness, "bad") == (1, {1}), WAIT_S, "`bad` on node 1 alone")
        # ... then its disk fails under a write to `shared` (which it leads).
        disk.fail()
        more, _ = _produce(cluster.bootstrap, 50, 50, 60000, topic="shared")
        acked["shared"] += more
        wait_until(lambda: _state(witness, "shared")[0] == 3, WAIT_S,
                   "leadership of `shared` off node 1")
        wait_until(lambda: _state(witness, "bad")[0] == -1, WAIT_S,
                   "`bad` without a leader (its only in-sync replica is on a lost dir)")
        assert 1 not in _state(witness, "shared")[1]
        # A preferred election would name node 1 (first replica, alive, in the ISR of
        # `bad`): refused, for both partitions.
        assert _elect_preferred(witness, "bad") == PREFERRED_LEADER_NOT_AVAILABLE
        assert _elect_preferred(witness, "shared") == PREFERRED_LEADER_NOT_AVAILABLE
        assert _state(witness, "bad")[0] == -1
        leader, isr = _state(witness, "shared")
        assert leader == 3 and 1 not in isr
        # Node 2 back: it is not in the ISR of `bad`, so nobody leads it (no unclean
        # election), and node 1 never gets `shared`'s ISR back while its dir is lost.
        cluster.start_node(2)
        wait_until(lambda: 2 in _state(witness, "shared")[1], WAIT_S, "node 2 back in sync")
        assert _state(witness, "bad")[0] == -1
        assert 1 not in _state(witness, "shared")[1]
        # It is in the metadata log: the active controller restarted (node 1 itself, its
        # disk still failing, or another: a new controller takes over), nothing changes.
        restarted = _controller_id(witness)
        print(f"restarting the active controller, node {restarted}")
        cluster.stop_node(restarted)
        cluster.start_node(restarted)
        wait_until(lambda: 2 in _state(witness, "shared")[1] and
                   _state(witness, "shared")[0] >= 0, WAIT_S, "`shared` led and in sync")
        assert _elect_preferred(witness, "bad") == PREFERRED_LEADER_NOT_AVAILABLE
        assert _state(witness, "bad")[0] == -1
        assert 1 not in _state(witness, "shared")[1]
        # Node 1's other dir is served all along.
        assert _state(witness, "good")[0] == 1
        good, _ = _produce(cluster.bootstrap, 50, 50, 30000, topic="good")
        assert len(good) == 50
        acked["good"] += good

        # Repaired and restarted: node 1 leads `bad` again, with every acknowledged record.
        disk.heal()
        cluster.stop_node(1)
        cluster.start_node(1)
        wait_until(lambda: _state(witness, "bad")[0] == 1, WAIT_S * 2,
                   "node 1 leading `bad` again after the repair")
        wait_until(lambda: 1 in _state(witness, "shared")[1], WAIT_S * 2,
                   "node 1 back in the ISR of `shared`")
        for topic in ("bad", "good", "shared"):
            report = check(acked[topic], _read_to_end(cluster.bootstrap, topic))
            assert report.ok, f"{topic}: {report.summary()}"

