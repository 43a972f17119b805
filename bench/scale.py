#!/usr/bin/env python3
"""Many partitions on three nodes: rillet beside Apache Kafka, one table per partition count.

For each --partitions count N, each system gets fresh 3-node clusters of combined
broker+controller nodes, started the same way as bench/compare_cluster.py starts them (its
Cluster classes), and runs these steps, each bounded by --step-timeout:

- create: CreateTopics for N partitions, RF=3 (topics of --per-topic partitions, requests of at
  most --per-request partitions, since Kafka refuses an operation of over 10,000 records),
  timed until every node's Metadata lists all N with a leader;
- Metadata for all topics (v12) from one node, --metadata-samples times: the response's size
  and its median round trip (sent to the last byte received, not decoded);
- kill -9 of a node that is not the active controller (DescribeQuorum), then: leader failover,
  until a surviving node's Metadata shows every partition led by a live node (both systems fence
  after broker.session.timeout.ms, 9 s by default); then the node restarted, until every ISR is
  full again (timed from the restart's spawn);
- controller heartbeat lateness: the longest gap between two heartbeats of a node that stayed
  up, at the active controller, minus broker.heartbeat.interval.ms (2 s, both systems), read
  before the kill (create and Metadata) and at the end (an error when the active controller
  changed in between: its record restarts at each activation); rillet's
  rillet_controller_heartbeat_gap_max_seconds metric (GET /metrics). Kafka exposes no such
  figure without JMX, so its cell stays "-";
- peak RSS (VmHWM) of each node: the killed one's is the larger of before the kill and after
  its restart.

No load runs during these steps: they measure metadata and control-plane work only. The same
Kafka-protocol client (rillet's codec over a blocking socket) asks both systems. A failed
step shows "error" in its cell, and later steps still run where they can; every node is
stopped on exit, on Ctrl-C and on SIGTERM.

    .venv/bin/python bench/scale.py [--partitions 1000,5000,10000] [--systems rillet,kafka]
"""
from __future__ import annotations

import argparse
import re
import signal
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import KAFKA_VERSION, MB  # noqa: E402
from compare_cluster import NODES, Cluster, RilletCluster, cluster_for  # noqa: E402
from measurements import (Measurements, error_lines, number, ratio,  # noqa: E402
                          with_spread)

from rillet.protocol.build import build  # noqa: E402
from rillet.protocol.codec import (decode_response, encode_request,  # noqa: E402
                                   request_schema, response_size)

METADATA, CREATE_TOPICS, DESCRIBE_QUORUM = 3, 19, 55
TOPIC_PREFIX = "scale-"
HEARTBEAT_INTERVAL_S = 2.0   # broker.heartbeat.interval.ms, the default of both systems
POLL_GAP_S = 0.2             # between two Metadata polls: each is large at these counts
Partitions = dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]


@dataclass(frozen=True)
class Reply:
    body: Any
    size: int        # bytes of the response frame, size prefix included
    seconds: float   # request sent to the last response byte read


class Wire:
    """One blocking Kafka-protocol connection to one node; reconnects after a failure."""

    def __init__(self, address: str, timeout: float) -> None:
        host, _, port = address.rpartition(":")
        self.address = (host, int(port))
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._correlation = 0

    def call(self, api_key: int, version: int, body: dict[str, Any],
             timeout: float | None = None) -> Reply:
        """One round trip; `timeout` (default the connection's) bounds each socket wait."""
        self._correlation += 1
        frame = encode_request(api_key, version, self._correlation, "rillet-scale",
                               build(request_schema(api_key, version), body))
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.address, timeout=self.timeout)
            self._sock.settimeout(timeout or self.timeout)
            started = time.monotonic()
            self._sock.sendall(frame)
            head = self._read(4)
            payload = self._read(response_size(head))
            seconds = time.monotonic() - started
        except BaseException:
            self.close()
            raise
        got, response = decode_response(api_key, version, payload)
        if got != self._correlation:
            self.close()
            raise ConnectionError(f"correlation id {got} != {self._correlation}")
        return Reply(response, 4 + len(payload), seconds)

    def _read(self, n: int) -> bytes:
        assert self._sock is not None
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise ConnectionError(f"{self.address}: closed mid-response")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def metadata(wire: Wire) -> Reply:
    return wire.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})


def bench_partitions(reply: Reply) -> Partitions:
    """(topic, partition) -> (leader, replicas, ISR) of the bench's topics in a Metadata answer."""
    return {(t.name, p.partition_index): (p.leader_id, tuple(p.replica_nodes),
                                          tuple(p.isr_nodes))
            for t in reply.body.topics if t.name.startswith(TOPIC_PREFIX) and not t.error_code
            for p in t.partitions}


def wait_for(what: str, check: Callable[[], bool], since: float, timeout: float) -> float:
    """Seconds from `since` until check() holds, polled every POLL_GAP_S; a check that raises
    (a node still starting) counts as not yet."""
    last: Exception | None = None
    while time.monotonic() - since < timeout:
        try:
            if check():
                return time.monotonic() - since
        except Exception as exc:  # noqa: BLE001 - polled again until the deadline
            last = exc
        time.sleep(POLL_GAP_S)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last error: {last!r})")


class ScaleRun:
    """The steps on one running cluster with `total` partitions; each fills Measurements rows."""

    def __init__(self, cluster: Cluster, total: int, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.total = total
        self.args = args
        self.wires = [Wire(f"127.0.0.1:{client}", args.request_timeout)
                      for client, _ in cluster.ports]
        self.victim: int | None = None      # index of the node killed
        self.rss_before_kill: list[int] = []
        self.quorum_at_start: tuple[int, int] | None = None   # (controller, epoch) at create

    def close(self) -> None:
        for wire in self.wires:
            wire.close()

    def _all_led(self, index: int, exclude: int | None = None) -> bool:
        parts = bench_partitions(metadata(self.wires[index]))
        return len(parts) == self.total and all(
            leader >= 0 and leader != exclude for leader, _, _ in parts.values())

    def create(self) -> dict[str, float]:
        per_topic = self.args.per_topic
        sizes = [min(per_topic, self.total - start) for start in range(0, self.total, per_topic)]
        topics = [{"name": f"{TOPIC_PREFIX}{i}", "num_partitions": n, "replication_factor": 3,
                   "assignments": [], "configs": []} for i, n in enumerate(sizes)]
        # Kafka's controller refuses one operation that writes more than 10,000 metadata
        # records (POLICY_VIOLATION): 10,000 partitions go as requests of at most
        # --per-request partitions each, one after another, to both systems alike.
        topics_per_request = max(1, self.args.per_request // per_topic)
        self.quorum_at_start = self._quorum()
        started = time.monotonic()
        for first in range(0, len(topics), topics_per_request):
            reply = self.wires[0].call(CREATE_TOPICS, 5, {
                "topics": topics[first:first + topics_per_request],
                "timeout": int(self.args.step_timeout * 1000),
                "validate_only": False}, timeout=self.args.step_timeout)
            failed = [(t.name, t.error_code) for t in reply.body.topics if t.error_code]
            if failed:
                raise RuntimeError(f"CreateTopics errors: {failed[:5]}")
        for index in range(NODES):
            wait_for(f"node {index + 1} serving {self.total} partitions",
                     lambda index=index: self._all_led(index), started, self.args.step_timeout)
        return {"create_s": time.monotonic() - started}

    def metadata_cost(self) -> dict[str, float]:
        replies = [metadata(self.wires[0]) for _ in range(self.args.metadata_samples)]
        if len(bench_partitions(replies[-1])) != self.total:
            raise RuntimeError("Metadata does not list every partition")
        return {"metadata_kb": replies[-1].size / 1024,
                "metadata_ms": statistics.median(r.seconds for r in replies) * 1000}

    def _quorum(self, index: int = 0) -> tuple[int, int]:
        """(active controller id, its epoch), as node `index` sees the quorum."""
        reply = self.wires[index].call(DESCRIBE_QUORUM, 1, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        part = reply.body.topics[0].partitions[0]
        return part.leader_id, part.leader_epoch

    def _pick_victim(self) -> int:
        return max(i for i in range(NODES) if i + 1 != self._quorum()[0])

    def failover(self) -> dict[str, float]:
        """kill -9 a node that is not the active controller; until every partition has a live
        leader, as a surviving node answers."""
        victim = self._pick_victim()
        self.rss_before_kill = [self.cluster.node_peak_rss_bytes(i) for i in range(NODES)]
        self.victim = victim
        started = time.monotonic()
        self.cluster.kill(victim)
        survivor = (victim + 1) % NODES
        return {"failover_s": wait_for(
            "every partition led by a live node",
            lambda: self._all_led(survivor, exclude=victim + 1), started,
            self.args.step_timeout)}

    def _isr_full(self, index: int) -> bool:
        parts = bench_partitions(metadata(self.wires[index]))
        return len(parts) == self.total and all(
            len(isr) == len(replicas) for _, replicas, isr in parts.values())

    def recovery(self) -> dict[str, float]:
        """Restart the killed node; until every ISR is full again."""
        if self.victim is None:
            raise RuntimeError("no node was killed")
        started = time.monotonic()
        self.cluster.spawn(self.victim)
        survivor = (self.victim + 1) % NODES
        return {"isr_full_s": wait_for("every ISR full", lambda: self._isr_full(survivor),
                                       started, self.args.step_timeout)}

    def lateness_before_kill(self) -> dict[str, float]:
        return self._heartbeat_lateness("heartbeat_late_create_s")

    def lateness_whole_run(self) -> dict[str, float]:
        return self._heartbeat_lateness("heartbeat_late_s")

    def _heartbeat_lateness(self, row: str) -> dict[str, float]:
        """The longest heartbeat gap of a node that stayed up, minus the interval, at the
        active controller so far (rillet only)."""
        if not isinstance(self.cluster, RilletCluster):
            return {}
        leader, epoch = self._quorum(0 if self.victim is None else (self.victim + 1) % NODES)
        if (leader, epoch) != self.quorum_at_start:
            # The record starts again at each activation: it would miss the run's worst gaps.
            raise RuntimeError(f"the active controller changed during the run "
                               f"({self.quorum_at_start} -> {(leader, epoch)})")
        url = f"http://127.0.0.1:{self.cluster.admin_ports[leader - 1]}/metrics"
        with urllib.request.urlopen(url, timeout=self.args.request_timeout) as resp:
            text = resp.read().decode()
        gaps = {int(node): float(value) for node, value in re.findall(
            r'^rillet_controller_heartbeat_gap_max_seconds\{broker="(\d+)"\} (\S+)$', text,
            re.MULTILINE)}
        healthy = [gap for node, gap in gaps.items()
                   if self.victim is None or node != self.victim + 1]
        if not healthy:
            raise RuntimeError(f"no heartbeat gaps at controller {leader}: {gaps}")
        return {row: max(0.0, max(healthy) - HEARTBEAT_INTERVAL_S)}

    def peak_rss(self) -> dict[str, float]:
        now = [self.cluster.node_peak_rss_bytes(i) for i in range(NODES)]
        before = self.rss_before_kill or [0] * NODES
        return {f"rss_node{i + 1}_mb": max(a, b) / MB for i, (a, b) in
                enumerate(zip(now, before))}


def measure(cluster: Cluster, total: int, args: argparse.Namespace) -> Measurements:
    m = Measurements()
    print(f"== {cluster.name} x{NODES}, {total} partitions ({cluster.workdir})", file=sys.stderr)
    run = ScaleRun(cluster, total, args)
    try:
        m.attempt(["start_s"], lambda: {"start_s": cluster.start()})
        if "start_s" in m.errors:
            return m
        for names, step in ((["create_s"], run.create),
                            (["metadata_kb", "metadata_ms"], run.metadata_cost),
                            (["heartbeat_late_create_s"], run.lateness_before_kill),
                            (["failover_s"], run.failover),
                            (["isr_full_s"], run.recovery),
                            (["heartbeat_late_s"], run.lateness_whole_run),
                            ([f"rss_node{i}_mb" for i in range(1, NODES + 1)], run.peak_rss)):
            m.attempt(names, step)
            print(f"    {', '.join(f'{k}={number(m.values[k])}' for k in names if k in m.values)}",
                  file=sys.stderr)
    finally:
        run.close()
        cluster.stop()
    return m


ROWS = [("start_s", "start to first acks=all write (s)"),
        ("create_s", "create, until every node serves (s)"),
        ("metadata_kb", "Metadata all topics, size (KiB)"),
        ("metadata_ms", "Metadata all topics, median (ms)"),
        ("failover_s", "kill -9: every leader live (s)"),
        ("isr_full_s", "restart: every ISR full (s)"),
        ("heartbeat_late_create_s", "heartbeat lateness max, to the kill (s)"),
        ("heartbeat_late_s", "heartbeat lateness max, whole run (s)"),
        *((f"rss_node{i}_mb", f"peak RSS node {i} (MB)") for i in range(1, NODES + 1))]


def render(results: dict[int, dict[str, Measurements]], args: argparse.Namespace) -> str:
    lines = [f"3 nodes each (combined broker+controller), RF=3, topics of {args.per_topic} "
             f"partitions, no client load; Kafka {KAFKA_VERSION}; one run per count"]
    for total, by_system in results.items():
        lines += ["", f"{total} partitions",
                  f"{'measure':<40}{'rillet':>12}{'kafka':>12}{'rillet/kafka':>14}"]
        for key, label in ROWS:
            cells = [with_spread(by_system.get(system), key) for system in ("rillet", "kafka")]
            rk = ratio(by_system.get("rillet"), by_system.get("kafka"), key)
            lines.append(f"{label:<40}{cells[0]:>12}{cells[1]:>12}{rk:>14}")
        lines += error_lines(by_system)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1000,5000,10000",
                        help="comma-separated partition counts, each on fresh clusters")
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--per-request", type=int, default=5000,
                        help="partitions per CreateTopics request (whole topics)")
    parser.add_argument("--systems", default="rillet,kafka")
    parser.add_argument("--metadata-samples", type=int, default=10)
    parser.add_argument("--step-timeout", type=float, default=600)
    parser.add_argument("--request-timeout", type=float, default=60)
    args = parser.parse_args(argv)
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so every `finally` stops its nodes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    results: dict[int, dict[str, Measurements]] = {}
    counts = [int(p) for p in args.partitions.split(",") if p.strip()]
    for total in counts:
        results[total] = {}
        for system in systems:
            with tempfile.TemporaryDirectory(prefix=f"scale-{system}-") as tmp:
                results[total][system] = measure(cluster_for(system, Path(tmp)), total, args)
        if len(counts) > 1:   # this count's table now, in case a later one does not finish
            print(render({total: results[total]}, args), file=sys.stderr)
    print(render(results, args))
    return 0 if all(not m.errors for r in results.values() for m in r.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
