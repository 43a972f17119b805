#!/usr/bin/env python3
"""CPU of follower fetching on 3 local nodes, per partition count: idle, and with k partitions
written to (the rest idle).

    .venv/bin/python bench/follower_fetch_cost.py [--partitions 1000,5000] [--news 50]
                                                  [--window 20] [--timeout 900]

For each partition count N: a fresh local 3-node cluster (no link proxies), one topic of N
partitions, RF=3, created and waited for until every ISR is full (Metadata), every node's
log dirs hold the N partition directories (the logs of a large create are made in the
background for a while after Metadata lists the partitions) and the nodes' CPU has settled
(two 5-second samples within 25 % of each other);
then two windows of --window seconds each:

- idle: nothing is written, the followers' fetches are all that runs;
- news: a producer (acks=1, confluent-kafka, in this process) writes --rate records a second
  spread over partitions 0..k-1 (k = --news), every other partition idle.

Printed per window: the three nodes' CPU time (user + system, from /proc/<pid>/stat) per
second of the window, the follower fetches the nodes served as leaders
(rillet_replica_fetch_requests_total) per second, and the CPU per follower fetch (all
the nodes' CPU divided by those fetches: leader and follower side of a fetch together, plus
whatever else the nodes did, such as the ISR checks and, in the news window, the produce
requests). CPU time, not wall: this machine may be loaded, and a busy machine stretches
wall time but not the CPU a piece of work costs.

Only public behaviour is used (Metadata, /metrics, /proc), so the same script measures an
older checkout: run it with PYTHONPATH=<that checkout>/broker_image:<that checkout>.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient as KafkaAdmin  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.processes import user_system_seconds  # noqa: E402
from tests.cluster import LocalCluster  # noqa: E402
from tests.harness import free_port  # noqa: E402
from tests.polling import wait_until  # noqa: E402

TOPIC = "fetchcost"
FETCHES = "rillet_replica_fetch_requests_total"
POLL_S = 0.5


def fetches_served(admin: str) -> float:
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(FETCHES + " "):
                return float(line.split()[1])
    return 0.0


def full_isrs(bootstrap: str, partitions: int) -> bool:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        topic = admin.list_topics(topic=TOPIC, timeout=30).topics.get(TOPIC)
    except Exception:
        return False
    return (topic is not None and topic.error is None and len(topic.partitions) == partitions
            and all(len(p.isrs) == 3 for p in topic.partitions.values()))


def logs_made(log_dirs: list[Path]) -> int:
    return sum(1 for d in log_dirs for child in d.glob(f"{TOPIC}-*") if child.is_dir())


def until(predicate: Any, timeout: float, what: str) -> float:
    """Seconds until `predicate` holds (AssertionError after `timeout`)."""
    start = time.monotonic()
    wait_until(predicate, timeout, what, interval=POLL_S)
    return time.monotonic() - start


class Window:
    """CPU and fetches served of every node between start() and stop()."""

    def __init__(self, pids: dict[int, int], admins: dict[int, str]) -> None:
        self.pids, self.admins = pids, admins

    def _sample(self) -> tuple[float, float, float]:
        return (sum(sum(user_system_seconds(p)) for p in self.pids.values()),
                sum(fetches_served(a) for a in self.admins.values()), time.monotonic())

    def measure(self, seconds: float) -> dict[str, float]:
        cpu0, fetches0, t0 = self._sample()
        time.sleep(seconds)
        cpu1, fetches1, t1 = self._sample()
        cpu, fetches, wall = cpu1 - cpu0, fetches1 - fetches0, t1 - t0
        return {"cpu_s_per_s": cpu / wall, "fetches_per_s": fetches / wall,
                "cpu_ms_per_fetch": 1000 * cpu / fetches if fetches else float("nan")}


def write_steadily(bootstrap: str, partitions: int, rate: int, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "log_level": 0})
    sent = 0
    start = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            producer.produce(TOPIC, b"x" * 100, partition=sent % partitions)
            sent += 1
        producer.poll(0.01)
    producer.flush(30)


def measure(root: Path, partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    admins: dict[int, str] = {}
    with LocalCluster(root, nodes=3, proxied=False) as cluster:
        for node_id in cluster.node_ids:
            admins[node_id] = f"127.0.0.1:{free_port()}"
            cluster.node(node_id).config["admin.http.listener"] = admins[node_id]
        cluster.start()
        admin = KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, partitions, 3)],
                                     request_timeout=args.timeout).values():
            f.result()
        created = until(lambda: full_isrs(cluster.bootstrap, partitions), args.timeout,
                        "created, every ISR full")
        until(lambda: all(logs_made(cluster.log_dirs(n)) >= partitions
                          for n in cluster.node_ids), args.timeout, "every log made")
        window = Window({n: cluster.node(n).proc.pid for n in cluster.node_ids}, admins)
        settled = settle(window, args.timeout)
        idle = window.measure(args.window)
        stop = threading.Event()
        writer = threading.Thread(target=write_steadily, daemon=True,
                                  args=(cluster.bootstrap, args.news, args.rate, stop))
        writer.start()
        time.sleep(2)   # the producer connected and writing
        news = window.measure(args.window)
        stop.set()
        writer.join(60)
        return {"partitions": partitions, "create_s": created, "settle_s": settled,
                "idle": idle, "news": news}


def settle(window: Window, timeout: float) -> float:
    """Seconds until two 5-second samples of the nodes' CPU agree within 25 %."""
    start = time.monotonic()
    previous = window.measure(5)["cpu_s_per_s"]
    while time.monotonic() - start < timeout:
        now = window.measure(5)["cpu_s_per_s"]
        if abs(now - previous) <= 0.25 * max(previous, 0.02):
            break
        previous = now
    return time.monotonic() - start


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"{'partitions':>10}  {'window':<22}  {'CPU s/s (3 nodes)':>17}  "
             f"{'fetches/s':>9}  {'CPU ms/fetch':>12}"]
    for r in results:
        for key, label in (("idle", "idle"), ("news", f"{args.news} written, rest idle")):
            m = r[key]
            lines.append(f"{r['partitions']:>10}  {label:<22}  {m['cpu_s_per_s']:>17.3f}  "
                         f"{m['fetches_per_s']:>9.1f}  {m['cpu_ms_per_fetch']:>12.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", default="1000,5000")
    parser.add_argument("--news", type=int, default=50, help="partitions written to")
    parser.add_argument("--rate", type=int, default=500, help="records a second")
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    results = []
    for n in (int(x) for x in args.partitions.split(",")):
        with tempfile.TemporaryDirectory(prefix="fetchcost-") as root:
            results.append(measure(Path(root), n, args))
            print(f"{n} partitions: created and in sync in {results[-1]['create_s']:.0f} s, "
                  f"CPU settled after {results[-1]['settle_s']:.0f} s more", flush=True)
    print(render(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
