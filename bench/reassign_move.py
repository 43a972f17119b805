#!/usr/bin/env python3
"""Moving partition data between brokers with Kafka's kafka-reassign-partitions, and what
producers see meanwhile.

    .venv/bin/python bench/reassign_move.py [--gib 1.0] [--throttle-mb 16] [--partitions 4]

A four-node rillet cluster on this machine. Topic `bulk` (--partitions, RF=1, all on broker 1)
is filled with --gib GiB by kafka-producer-perf-test (1 KiB records, acks=1). A background
producer (confluent-kafka, acks=all, idempotent, --rate records/s of 1 KiB) writes to topic
`live` (3 partitions, RF=3, min.insync.replicas=2) for the whole run and times every delivery.
Then `bulk` moves twice with `kafka-reassign-partitions --execute` and `--verify` (polled until
it reports every partition complete, which also removes the throttle):
  1. broker 1 -> broker 2, unthrottled;
  2. broker 2 -> broker 3, with --throttle (--throttle-mb MB/s).
One table: per phase (before, each move), its wall time, bytes moved, MB/s, and the live
producer's delivery latency p50/p99 and failed deliveries in that phase.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.cluster import LocalCluster  # noqa: E402

TOOLS = REPO / "tools" / "kafka"
MB = 1_000_000
RECORD = 1024


def tool(name: str, *args: str, timeout: float = 3600) -> str:
    done = subprocess.run([str(TOOLS / name), *args], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


class LiveProducer(threading.Thread):
    """acks=all deliveries at a fixed rate; (send time, latency or None when failed)."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 1})
        self.rate = rate
        self.samples: list[tuple[float, float | None]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        payload = b"x" * RECORD
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            sent = time.monotonic()

            def done(err, _msg, sent=sent) -> None:
                self.samples.append((sent, None if err else time.monotonic() - sent))
            self.producer.produce("live", payload, on_delivery=done)
            self.producer.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                self.stopping.wait(pause)
        self.producer.flush(60)

    def between(self, start: float, end: float) -> tuple[list[float], int]:
        window = [s for s in self.samples if start <= s[0] < end]
        return [lat for _, lat in window if lat is not None], sum(lat is None for _, lat in window)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def move(bootstrap: str, work: Path, partitions: int, target: int,
         throttle: int | None) -> float:
    plan = {"version": 1, "partitions": [
        {"topic": "bulk", "partition": p, "replicas": [target]} for p in range(partitions)]}
    path = work / f"move-to-{target}.json"
    path.write_text(json.dumps(plan))
    start = time.monotonic()
    extra = ["--throttle", str(throttle)] if throttle else []
    tool("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
         "--reassignment-json-file", str(path), "--execute", *extra)
    while True:
        out = tool("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
                   "--reassignment-json-file", str(path), "--verify")
        if out.count("is completed") >= partitions:
            return time.monotonic() - start
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--throttle-mb", type=float, default=16.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=int, default=200, help="live producer records/s")
    ap.add_argument("--before-s", type=float, default=20.0)
    args = ap.parse_args()
    total = int(args.gib * (1 << 30))
    with tempfile.TemporaryDirectory(prefix="rillet-move-") as tmp, \
            LocalCluster(Path(tmp), nodes=4, proxied=False) as cluster:
        cluster.start()
        bootstrap = cluster.bootstrap
        tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "bulk",
             "--replica-assignment", ",".join(["1"] * args.partitions))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        live_topic = NewTopic("live", 3, 3, config={"min.insync.replicas": "2"})
        for future in admin.create_topics([live_topic], request_timeout=60).values():
            future.result()
        print(f"filling bulk with {total / (1 << 30):.2f} GiB ...", flush=True)
        fill_start = time.monotonic()
        tool("kafka-producer-perf-test", "--topic", "bulk", "--num-records",
             str(total // RECORD), "--record-size", str(RECORD), "--throughput", "-1",
             "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1",
             "batch.size=262144", "linger.ms=20")
        print(f"filled in {time.monotonic() - fill_start:.0f} s", flush=True)

        live = LiveProducer(bootstrap, args.rate)
        live.start()
        phases: list[tuple[str, float, float, int]] = []
        t0 = time.monotonic()
        time.sleep(args.before_s)   # the baseline window is a length of time by definition
        phases.append(("before (no move)", t0, time.monotonic(), 0))
        for label, target, throttle in (
                ("move 1 -> 2, unthrottled", 2, None),
                (f"move 2 -> 3, throttle {args.throttle_mb:g} MB/s", 3,
                 int(args.throttle_mb * MB))):
            print(f"{label} ...", flush=True)
            start = time.monotonic()
            move(bootstrap, Path(tmp), args.partitions, target, throttle)
            phases.append((label, start, time.monotonic(), total))
        live.stopping.set()
        live.join(120)

        print()
        print(f"rillet, 4 nodes, {args.partitions} partitions RF=1 holding "
              f"{total / (1 << 30):.2f} GiB; live producer {args.rate} rec/s x {RECORD} B, "
              "acks=all, RF=3, min.insync.replicas=2")
        print(f"{'phase':<34} {'wall s':>8} {'moved MB/s':>11} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'sent':>7} {'failed':>7}")
        for label, start, end, moved in phases:
            lats, failed = live.between(start, end)
            rate = f"{moved / MB / (end - start):.1f}" if moved else "-"
            print(f"{label:<34} {end - start:>8.1f} {rate:>11} "
                  f"{percentile(lats, 0.5) * 1000:>8.1f} {percentile(lats, 0.99) * 1000:>8.1f} "
                  f"{len(lats) + failed:>7} {failed:>7}")
        if live.samples:
            print(f"mean latency overall {statistics.mean(l for _, l in live.samples if l) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
