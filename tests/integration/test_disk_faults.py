"""A full disk on a partition leader mid-stream (tests/disk_faults.py: its log dir on a small
tmpfs in a private mount namespace; the metadata log elsewhere).

RF=3, min.insync.replicas=2, acks=all. The disk fills: a Produce to the leader is answered
KAFKA_STORAGE_ERROR (or NOT_LEADER_OR_FOLLOWER, once leadership has moved), the broker keeps
running, and nothing acknowledged is lost; the producer goes on with the new leader and the
replicas end identical. A failed write takes the log dir offline, as in Kafka, so the leader
of the full disk gives up its partitions (test_log_dir_failure.py shows that path with a
second, healthy dir). Unlike Kafka, a broker whose only log dir failed keeps running instead
of halting.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from rillet.records import Record, encode_batch
from tests.checker import Write, check
from tests.cluster import LocalCluster
from tests.disk_faults import can_make_small_disks, small_disk
from tests.integration.test_cluster import RACKS, WAIT_S
from tests.integration.test_data_link_faults import _read_to_end
from tests.integration.test_replication import (REPLICATION, _leader_of,
                                                _replicas_identical, _replicated_topic)
from tests.polling import read_until, wait_until
from tests.wire import Wire

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not can_make_small_disks(),
                                reason="needs root and unshare to mount a private tmpfs")

DISK_BYTES = 8 << 20
VALUE = b"x" * 4000
STORAGE_ERROR, NOT_LEADER = 56, 6


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


def _probe(address: str) -> int:
    """The error code of one acks=all Produce of a 256 KiB record to the node at `address`."""
    batch = encode_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None,
                                 value=b"p" * (256 << 10), headers=[])])
    with Wire(address, timeout=30) as w:
        resp = w.request(0, 9, {"acks": -1, "timeout": 8000, "topic_data": [
            {"name": "full", "partition_data": [{"index": 0, "records": batch}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


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
        ballast = _fill(disk, 64 << 10)

        error = read_until(lambda: _probe(full.bootstrap), lambda e: e != 0, WAIT_S)
        assert error in (STORAGE_ERROR, NOT_LEADER), f"a full disk answered error {error}"
        more, failed = _produce(cluster.bootstrap, 200, 100, 8000)
        acked += more
        print(f"disk full: probe error {error}; {len(more)} acknowledged, {failed} not")
        assert full.alive() and full.answers(5.0), "the broker stopped serving"
        early = _read_to_end(full.bootstrap, "full")
        assert {r.value for r in early} >= {w.value for w in acked[:200]}

        ballast.unlink()
        wait_until(lambda: _probe(full.bootstrap) == 0 or
                   _leader_of(cluster, "full", 0) != 1, WAIT_S,
                   "writes to be taken again once space is free")
        after, _ = _produce(cluster.bootstrap, 300, 100, 30000)
        assert len(after) == 100, "the producer did not recover after space was freed"
        acked += after
        final = _read_to_end(cluster.bootstrap, "full")
        report = check(acked, final)
        assert report.ok, report.summary()
        wait_until(lambda: _replicas_identical(cluster, "full", 0, [2, 3]), WAIT_S,
                   "the followers to be identical")
        assert full.alive(), "the broker died of the full disk"
