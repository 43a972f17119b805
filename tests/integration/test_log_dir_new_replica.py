"""A new replica made on a broker while one of its log dirs is offline (KIP-858), on a real
3-node cluster with a FUSE disk that fails on demand (tests/faulty_fs.py; the `setup`
fixture of test_log_dir_assignment.py: node 1's first log dir is on that disk).

Node 1's dir `failing` fails while it holds replicas of `bad` and `moved`. Then, the dir
still offline:
- `bad` is deleted and created again under its name: node 1's replica of the new topic is a
  new one, made in its online dir, catches up and joins the ISR (the old one's offline mark
  must not keep it offline);
- `moved` is reassigned off node 1 and back: the same;
- a new topic `fresh` goes to the online dir.
Each is reported to the controller with its dir (DescribeLogDirs on node 1 lists it there),
and nothing acknowledged is lost.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rillet.client.admin import AdminClient
from tests.checker import Write, check
from tests.cluster import LocalCluster
from tests.faulty_fs import FaultyDisk, can_make_faulty_disks
from tests.harness import BrokerProcess
from tests.integration.test_cluster import WAIT_S
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_disk_faults import _produce
from tests.integration.test_log_dir_assignment import _state, setup  # noqa: F401 (fixture)
from tests.integration.test_log_dir_failure import _log_dirs, _offline_gauge
from tests.integration.test_replication import _replicated_topic
from tests.polling import wait_until
from tests.wire import Wire

pytestmark = pytest.mark.skipif(not can_make_faulty_disks(),
                                reason="needs root, /dev/fuse, fusermount3 and mfusepy")

STORAGE_ERROR, UNKNOWN_TOPIC = 56, 3


def _admin(coro_fn: Any, bootstrap: str) -> Any:
    async def run() -> Any:
        async with AdminClient(bootstrap, timeout=15) as admin:
            return await coro_fn(admin)
    return asyncio.run(run())


def _replicas(node: BrokerProcess, topic: str) -> tuple[int, ...] | None:
    """The replicas of partition 0 of `topic` as `node` sees it (None: no such topic);
    never creates the topic."""
    with Wire(node.bootstrap, timeout=15) as w:
        resp = w.request(3, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    if int(resp.topics[0].error_code) == UNKNOWN_TOPIC:
        return None
    return tuple(resp.topics[0].partitions[0].replica_nodes)


def _replicas_everywhere(cluster: LocalCluster, topic: str,
                         want: tuple[int, ...] | None) -> bool:
    return all(_replicas(cluster.node(n), topic) == want for n in cluster.node_ids)


def test_a_new_replica_while_a_log_dir_is_offline_is_made_in_an_online_dir(
        setup: tuple[LocalCluster, FaultyDisk, Path, str]) -> None:
    cluster, disk, failing, admin = setup
    node, witness = cluster.node(1), cluster.node(3)
    with cluster.start():
        # In creation order: `bad` on the failing disk (a tie: the first dir), `good` on
        # the data dir (the emptier), `moved` on the failing disk (a tie again).
        for topic in ("bad", "good", "moved"):
            _replicated_topic(cluster, topic, 1, assignment=[[1, 2, 3]])
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (0, {"bad", "moved"}), dirs
        acked: dict[str, list[Write]] = {}
        for topic in ("bad", "moved"):
            acked[topic], _ = _produce(cluster.bootstrap, 0, 50, 30000, topic=topic)
            assert len(acked[topic]) == 50

        disk.fail()
        more, _ = _produce(cluster.bootstrap, 50, 50, 60000, topic="moved")
        acked["moved"] += more
        for topic in ("bad", "moved"):
            wait_until(lambda t=topic: _state(witness, t)[0] in (2, 3)
                       and 1 not in _state(witness, t)[1], WAIT_S,
                       f"`{topic}` led elsewhere and node 1 out of its ISR")
        assert _log_dirs(node.bootstrap)[str(failing)][0] == STORAGE_ERROR

        # `bad` deleted and made again under its name, the dir still offline.
        _admin(lambda a: a.delete_topic("bad"), cluster.bootstrap)
        wait_until(lambda: _replicas_everywhere(cluster, "bad", None), WAIT_S, "`bad` deleted everywhere")
        _replicated_topic(cluster, "bad", 1, assignment=[[1, 2, 3]])
        # `moved` off node 1 and back.
        assert _admin(lambda a: a.alter_partition_reassignments({("moved", 0): [2, 3]}),
                      cluster.bootstrap) == {("moved", 0): 0}
        wait_until(lambda: _replicas_everywhere(cluster, "moved", (2, 3)), WAIT_S,
                   "`moved` off node 1")
        assert _admin(lambda a: a.alter_partition_reassignments({("moved", 0): [1, 2, 3]}),
                      cluster.bootstrap) == {("moved", 0): 0}
        _replicated_topic(cluster, "fresh", 1, assignment=[[1, 2, 3]])

        for topic in ("bad", "moved", "fresh"):
            wait_until(lambda t=topic: 1 in _state(witness, t)[1], WAIT_S,
                       f"node 1's new replica of `{topic}` in the ISR")
        dirs = _log_dirs(node.bootstrap)
        assert dirs[str(failing)] == (STORAGE_ERROR, set()), dirs
        assert dirs[str(node.data_dir)][0] == 0
        assert {"bad", "moved", "fresh", "good"} <= dirs[str(node.data_dir)][1], dirs
        assert _offline_gauge(admin) == 1
        assert node.alive()

        # The new replicas take writes; nothing acknowledged to `moved` was lost.
        new_bad, _ = _produce(cluster.bootstrap, 0, 50, 30000, topic="bad")
        assert len(new_bad) == 50
        report = check(new_bad, _read_to_end(cluster.bootstrap, "bad"))
        assert report.ok, f"bad: {report.summary()}"
        report = check(acked["moved"], _read_to_end(cluster.bootstrap, "moved"))
        assert report.ok, f"moved: {report.summary()}"
