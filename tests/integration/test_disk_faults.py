"""A full disk on a partition leader mid-stream (tests/disk_faults.py: its log dir on a small
tmpfs in a private mount namespace; the metadata log elsewhere).

RF=3, min.insync.replicas=2, acks=all. The disk fills: the failed write takes the broker's
only log dir offline and, as in Kafka, a broker whose every log dir failed halts (exit 1,
"Shutdown broker because all log dirs ... have failed"). Nothing acknowledged is lost: the
producer goes on with the new leader. The broker restarted on a replaced (empty) disk catches
up and rejoins the ISR, and the replicas end identical. test_log_dir_failure.py shows a broker
with a second, healthy dir that keeps serving it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.checker import Write, check
from tests.cluster import LocalCluster
from tests.disk_faults import can_make_small_disks, small_disk
from tests.integration.test_cluster import RACKS, WAIT_S
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_replication import (REPLICATION, _leader_of,
                                                _replicas_identical, _replicated_topic)
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not can_make_small_disks(),
                                reason="needs root and unshare to mount a private tmpfs")

DISK_BYTES = 8 << 20
VALUE = b"x" * 4000


def _produce(bootstrap: str, first: int, count: int, timeout_ms: int,
             topic: str = "full") -> tuple[list[Write], int]:
    """Produce records first..first+count-1 (idempotent, acks=all); what was acknowledged,
    and how many were not."""
    acked: list[Write] = []
    failed = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(Write(msg.partition(), msg.key(), msg.value()))
        else:
            failed[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": timeout_ms, "request.timeout.ms": 5000})
    for i in range(first, first + count):
        producer.produce(topic, b"%08d" % i + VALUE, key=b"%d" % i, partition=0,
                         on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(timeout_ms / 1000 + 30)
    return acked, failed[0]


def _fill(directory: Path, leave: int) -> Path:
    """Write a ballast file until `leave` bytes are free; its path."""
    stat = os.statvfs(directory)
    ballast = directory / "ballast"
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))
    return ballast


def test_a_full_disk_on_the_leader_loses_nothing_acknowledged(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes=3, racks=RACKS,
                           extra_config={**REPLICATION, "offsets.topic.num.partitions": 1})
    full = cluster.node(1)
    full.config["metadata.log.dir"] = str(tmp_path / "metadata-1")
    full.prefix = small_disk(full.data_dir, DISK_BYTES)
    with cluster.start():
        _replicated_topic(cluster, "full", 1, assignment=[[1, 2, 3]])
        assert _leader_of(cluster, "full", 0) == 1
        acked, _ = _produce(cluster.bootstrap, 0, 200, 30000)
        assert len(acked) == 200
        # The tmpfs as the broker sees it, through its own mount namespace.
        assert full.proc is not None
        disk = Path(f"/proc/{full.proc.pid}/root") / full.data_dir.relative_to("/")
        _fill(disk, 64 << 10)

        more, failed = _produce(cluster.bootstrap, 200, 100, 30000)
        wait_until(lambda: not full.alive(), WAIT_S, "the broker of the full disk to halt")
        assert full.proc.returncode == 1, full.proc.returncode
        assert "Shutdown broker because all log dirs" in full.log(), full.log()[-3000:]
        print(f"disk full: the broker halted; {len(more)} acknowledged, {failed} not")
        assert len(more) == 100, "the producer did not go on with the new leader"
        acked += more

        # The tmpfs ended with the process: the restart is on a replaced, empty disk.
        cluster.start_node(1)
        after, _ = _produce(cluster.bootstrap, 300, 100, 30000)
        assert len(after) == 100, "the producer did not carry on after the restart"
        acked += after
        final = _read_to_end(cluster.bootstrap, "full")
        report = check(acked, final)
        assert report.ok, report.summary()
        wait_until(lambda: 1 in _isr(cluster.bootstrap, "full", 0), WAIT_S,
                   "the restarted broker to catch up and rejoin the ISR")
        wait_until(lambda: _replicas_identical(cluster, "full", 0, [2, 3]), WAIT_S,
                   "the followers to be identical")


def _isr(bootstrap: str, topic: str, partition: int) -> list[int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return list(meta.topics[topic].partitions[partition].isrs)
