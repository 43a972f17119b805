"""Issue 27, the kafka-python stall: no Metadata answer names a fenced leader.

Before the fix the controller fenced a broker in one commit and moved its leaderships in the
next, and Metadata named the fenced broker as leader (with LEADER_NOT_AVAILABLE, but a
leader id missing from the brokers list). kafka-python 3.0.12 reads the id alone, fails to
look it up, and its sender thread stops for good (tests/kafka_python_unknown_leader.py).

A 3-node cluster, a 6-partition RF=3 topic: while node 2 is stopped (controlled shutdown)
and started, then killed and started (a new process registering), a thread asks nodes 1
and 3 for Metadata without pause; no answer may name a leader outside its brokers list. An
idempotent acks=all kafka-python producer runs through it all; its flush ends and every
record is acknowledged.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.cluster import LocalCluster
from tests.integration.test_replication import _cluster, _replicated_topic
from tests.kafka_python_scale import Stream
from tests.wire import Wire

pytestmark = pytest.mark.timeout(600)

TOPIC, PARTITIONS = "fenced", 6


class MetadataWatch:
    """Asks for TOPIC's Metadata over and over, through each address in turn, and keeps
    every answer that names a leader not among its brokers."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.answers = 0
        self.bad: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MetadataWatch":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            turn += 1
            try:
                with Wire(self.addresses[turn % len(self.addresses)], timeout=5) as wire:
                    for _ in range(200):
                        if self._stop.is_set():
                            return
                        self._check(wire.request(3, 7, {
                            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}))
            except OSError:   # that node is restarting or slow: the other one next
                self._stop.wait(0.05)

    def _check(self, resp: object) -> None:
        self.answers += 1
        brokers = {b.node_id for b in resp.brokers}   # type: ignore[attr-defined]
        for topic in resp.topics:                     # type: ignore[attr-defined]
            for p in topic.partitions:
                if p.leader_id != -1 and p.leader_id not in brokers:
                    self.bad.append(f"{topic.name}-{p.partition_index}: leader {p.leader_id}, "
                                    f"brokers {sorted(brokers)}, error {p.error_code}")


def _restart(cluster: LocalCluster, node_id: int, kill: bool) -> None:
    if kill:
        cluster.kill_node(node_id)
    else:
        cluster.stop_node(node_id)
    cluster.start_node(node_id)


def test_no_metadata_answer_names_a_fenced_leader(tmp_path: Path) -> None:
    with _cluster(tmp_path).start() as cluster:
        _replicated_topic(cluster, TOPIC, PARTITIONS)
        others = [cluster.node(n).bootstrap for n in (1, 3)]
        stream = Stream(cluster.bootstrap, TOPIC)
        with MetadataWatch(others) as watch:
            stream.start()
            try:
                for kill in (False, True, False, True):
                    _restart(cluster, 2, kill)
            finally:
                stream.stop()
        started = time.monotonic()
        stream.producer.flush(timeout=120)
        stream.producer.close(timeout=10)
        print(f"{watch.answers} Metadata answers; {stream.acked} of {stream.sent} acknowledged;"
              f" flush took {time.monotonic() - started:.1f} s")
        assert watch.answers > 100, "the watch asked too little to mean anything"
        assert watch.bad == [], f"{len(watch.bad)} answers named a fenced leader: {watch.bad[:5]}"
        assert stream.errors == [] and stream.acked == stream.sent, (
            f"acknowledged {stream.acked} of {stream.sent}; errors {stream.errors[:5]}")
