#!/usr/bin/env python3
"""How long a node takes to answer an all-topics Metadata request at many partitions.

Three local rillet nodes (combined broker+controller), one topic of --partitions partitions,
RF=3, nothing else running. Once every partition has a leader and a full ISR, node 1 is
asked --samples times, one request at a time:

- raw v12 and v1: all topics over one blocking socket with rillet's codec (bench/scale.py's
  Wire), timed from the request sent to the last byte of the answer read (not decoded);
- librdkafka: confluent-kafka's AdminClient.list_topics(), the whole call, decoding included
  (librdkafka's decoder is C, a few milliseconds of it at 5,000 partitions).

Each row is the median and min-max over the samples. A node that answers from what it
encoded for an earlier request pays only the first time; run it on the commits to compare.
Every node is stopped on exit, and the run is bounded by --timeout.

    .venv/bin/python bench/metadata_answer.py [--partitions 5000] [--samples 20]
"""
from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import free_port  # noqa: E402
from scale import METADATA, Wire  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from rillet.defs.cluster_id import new_cluster_id  # noqa: E402
from rillet.local_cluster import (bootstrap_servers, cluster_settings,  # noqa: E402
                                  plan_nodes_on, serve_command, stop_processes)

TOPIC = "meta-bench"


def _settled(admin: AdminClient, partitions: int) -> bool:
    """Every partition led, every ISR full: the cluster's own metadata work is done."""
    try:
        topic = admin.list_topics(topic=TOPIC, timeout=10).topics.get(TOPIC)
    except Exception:
        return False
    return (topic is not None and topic.error is None and len(topic.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == 3 for p in topic.partitions.values()))


def _wait(what: str, check: Callable[[], bool], deadline: float) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


def _timed(samples: int, call: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def run(partitions: int, samples: int, timeout: float, workdir: Path) -> None:
    deadline = time.monotonic() + timeout
    specs = plan_nodes_on([(free_port(), free_port()) for _ in range(3)], workdir)
    settings = cluster_settings(specs, new_cluster_id(), None,
                                {"group.initial.rebalance.delay.ms": 0})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for spec in specs:
            spec.log_dir.mkdir(parents=True)
            with open(workdir / f"node-{spec.node_id}.log", "ab") as log:
                procs.append(subprocess.Popen(serve_command(settings[spec.node_id]),
                                              stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL))
        admin = AdminClient({"bootstrap.servers": bootstrap_servers(specs), "log_level": 3})
        _wait("cluster up", lambda: _try_create(admin, partitions), deadline)
        _wait("every partition led, every ISR full", lambda: _settled(admin, partitions),
              deadline)
        node1 = AdminClient({"bootstrap.servers": specs[0].client_address, "log_level": 3})
        wire = Wire(specs[0].client_address, 60)
        rows = {
            "raw v12": lambda: wire.call(METADATA, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}),
            "raw v1": lambda: wire.call(METADATA, 1, {"topics": None}),
            "librdkafka list_topics": lambda: node1.list_topics(timeout=60),
        }
        size = wire.call(METADATA, 12, {"topics": None}).size
        print(f"{partitions} partitions, RF=3, 3 nodes; all-topics answer {size / 1024:.0f} KiB;"
              f" {samples} samples each (ms)")
        for name, call in rows.items():
            ms = _timed(samples, call)
            print(f"  {name:24} median {statistics.median(ms):7.1f}   "
                  f"min {min(ms):7.1f}   max {max(ms):7.1f}   first {ms[0]:7.1f}")
        wire.close()
    finally:
        stop_processes(procs, 30)


def _try_create(admin: AdminClient, partitions: int) -> bool:
    try:
        for future in admin.create_topics([NewTopic(TOPIC, partitions, 3)],
                                          request_timeout=60).values():
            future.result()
        return True
    except Exception as exc:
        return "already exists" in str(exc).lower()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600.0, help="the whole run, seconds")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with tempfile.TemporaryDirectory(prefix="rillet-meta-bench-") as tmp:
        run(args.partitions, args.samples, args.timeout, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
