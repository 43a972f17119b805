"""Followers fetch through fetch sessions (KIP-227, issue 25), on 3 real nodes.

Node 1 leads every partition of a 60-partition topic, nodes 2 and 3 follow them all. After
the full fetch that opened each follower's session, a Fetch names only the partitions
whose position moved: none while the topic is idle (and the idle followers stay in every
ISR past replica.lag.time.max.ms, their silence counting as fetches), and only the one
partition written to while a producer writes to it, whose records still reach both
followers (a session reopened after a timed-out fetch may name everything once). Counted on the leader from /metrics (rillet_replica_fetch_*), not timed.
"""
from __future__ import annotations

import urllib.request
from pathlib import Path

from confluent_kafka import Producer

from tests.harness import free_port
from tests.integration.test_cluster import WAIT_S
from tests.integration.test_replication import _cluster, _replicated_topic
from tests.polling import read_until, wait_until

TOPIC, PARTITIONS, WRITTEN, RECORDS = "sessions", 60, 7, 20
# An idle follower's fetch waits replica.fetch.wait.max.ms (500 ms) at the leader: this
# many of them span longer than replica.lag.time.max.ms for each. 6 s (not REPLICATION's
# 3 s): a follower the machine starves of CPU for a few seconds must not look idle-dropped.
LAG_TIME_MS = 6000
IDLE_FETCHES = 2 * 14


def _metrics(admin: str) -> dict[str, float]:
    """Every unlabelled sample and the log end offsets of TOPIC on one node's /metrics."""
    out: dict[str, float] = {}
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _end_offset(sample: dict[str, float], partition: int) -> float:
    return sample.get(f'rillet_log_end_offset{{partition="{partition}",topic="{TOPIC}"}}', -1)


FETCHES, NAMED, OPENED = ("rillet_replica_fetch_requests_total",
                          "rillet_replica_fetch_request_partitions_total",
                          "rillet_replica_fetch_sessions_opened_total")


def _reopened(before: dict[str, float], after: dict[str, float]) -> float:
    """Partitions the full fetches of sessions opened between two samples may name: a
    fetch that timed out on a loaded machine reopens its session, as it should."""
    return (after[OPENED] - before[OPENED]) * (PARTITIONS + 1)


def test_followers_name_only_changed_partitions_after_the_first_fetch(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, **{"offsets.topic.num.partitions": 1,
                                    "replica.lag.time.max.ms": LAG_TIME_MS})
    admins = {}
    for node_id in cluster.node_ids:
        admins[node_id] = f"127.0.0.1:{free_port()}"
        cluster.node(node_id).config["admin.http.listener"] = admins[node_id]
    with cluster.start():
        _replicated_topic(cluster, TOPIC, PARTITIONS, assignment=[[1, 2, 3]] * PARTITIONS)
        leader = admins[1]
        # Each follower's session has named every partition it follows (added to it).
        start = read_until(lambda: _metrics(leader), lambda m: m.get(
            "rillet_replica_leader_count", 0) >= PARTITIONS and m.get(
            "rillet_replica_under_replicated_partitions", 1) == 0 and m.get(
            NAMED, 0) >= 2 * PARTITIONS, WAIT_S)

        idle = read_until(lambda: _metrics(leader),
                          lambda m: m[FETCHES] >= start[FETCHES] + IDLE_FETCHES, WAIT_S)
        assert idle[NAMED] - start[NAMED] <= _reopened(start, idle), (
            f"idle fetches named {idle[NAMED] - start[NAMED]} partitions in "
            f"{idle[FETCHES] - start[FETCHES]} requests")
        assert idle["rillet_replica_isr_shrinks_total"] == \
            start["rillet_replica_isr_shrinks_total"], "an idle follower left an ISR"
        assert idle["rillet_replica_under_replicated_partitions"] == 0

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 0})
        failed: list[str] = []
        for i in range(RECORDS):
            producer.produce(TOPIC, b"v%d" % i, partition=WRITTEN,
                             on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
            producer.flush(30)   # one batch each: one fetch round each
        assert not failed, failed[:3]
        for node_id in (2, 3):
            wait_until(lambda: _end_offset(_metrics(admins[node_id]), WRITTEN) == RECORDS,
                       WAIT_S, f"node {node_id} to replicate partition {WRITTEN}")
        written = _metrics(leader)
        fetches = written[FETCHES] - idle[FETCHES]
        named = written[NAMED] - idle[NAMED]
        # Every acks=all write needed both followers' positions past it: each named the
        # written partition at least once per record (batches may share a round).
        assert named >= 2, (fetches, named)
        # ... and named nothing else: at most one partition per fetch, not 60.
        assert named <= fetches + _reopened(idle, written), \
            f"{named} partitions named in {fetches} fetches"
        assert _end_offset(written, WRITTEN) == RECORDS
        print(f"\n{fetches:.0f} follower fetches while writing named {named:.0f} "
              f"partitions; {idle[FETCHES] - start[FETCHES]:.0f} idle ones named none")
