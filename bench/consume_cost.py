#!/usr/bin/env python3
"""Broker CPU per MB a consumer reads: one node, one topic, Kafka's kafka-consumer-perf-test.

    .venv/bin/python bench/consume_cost.py [--partitions 8] [--records 300000] [--runs 3]
                                           [--source DIR[,DIR...]] [--kafka]
                                           [--timeout 300]

A topic of --partitions partitions is filled once (kafka-producer-perf-test, 1 KB records,
acks=1) by a broker running the first source. Then, for each of --runs rounds, each source
in turn (the order rotated between rounds) serves the same data directory: its broker is
started, kafka-consumer-perf-test reads all the records from the start (a fresh group each
time), and the broker's CPU time (user + system of its process tree, from /proc) over that
read is divided by the MB read. CPU time, not wall: this machine is shared, and a busy
machine stretches wall time but not the CPU a piece of work costs. The tool's fetch MB/s is
printed beside it (wall-clock, so only comparable within one quiet run).

--source names broker_image directories (default: this checkout's); e.g. an older commit's,
exported with `git archive <commit> broker_image | tar -x -C /tmp/old`, gives a before/after
table from one run on the same machine state. --kafka adds an Apache Kafka node (compare.py's,
its own data dir, filled the same way) to the rotation.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the broker process and tool wrappers compare.py runs)
from processes import pids_user_system, process_tree  # noqa: E402


@dataclass(frozen=True)
class Read:
    user_ms_per_mb: float
    system_ms_per_mb: float
    fetch_mb_s: float

    @property
    def cpu_ms_per_mb(self) -> float:
        return self.user_ms_per_mb + self.system_ms_per_mb


class SourceBroker(compare.RilletBroker):
    """compare.py's rillet node on a given data dir, running the rillet source in ``source``."""

    def __init__(self, workdir: Path, source: Path) -> None:
        super().__init__(workdir)
        self.source = source

    def start(self, timeout: float) -> float:
        saved = compare.source_env
        compare.source_env = lambda: {**os.environ, "PYTHONPATH": str(self.source)}
        try:
            return super().start(timeout)
        finally:
            compare.source_env = saved


class KeptKafka(compare.KafkaBroker):
    """compare.py's Kafka node, its storage formatted once and kept across restarts."""

    formatted = False

    def prepare(self) -> None:
        if not self.formatted:
            super().prepare()
            self.formatted = True


def one_read(broker: compare.Broker, topic: str, records: int, timeout: float) -> Read:
    """The broker's CPU and the tool's speed over one full read of ``topic``."""
    assert broker.proc is not None
    pids = process_tree(broker.proc.pid)
    user0, sys0 = pids_user_system(pids)
    result = compare.consumer_perf(broker.bootstrap, topic, records, timeout)
    user1, sys1 = pids_user_system(pids)
    mb = records * compare.RECORD_SIZE / compare.MB
    return Read((user1 - user0) * 1000 / mb, (sys1 - sys0) * 1000 / mb, result["fetch_mb_s"])


def fill(broker: compare.Broker, topic: str, args: argparse.Namespace) -> None:
    """The topic's records, and one read of them (discarded): the first consumer group
    creates the offsets topic, which no measured read should pay for."""
    broker.start(120)
    try:
        compare.create_topic(broker.bootstrap, topic, args.partitions)
        compare.producer_perf(broker.bootstrap, topic, args.records, "1", -1, args.timeout)
        compare.consumer_perf(broker.bootstrap, topic, args.records, args.timeout)
    finally:
        broker.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", default=str(compare.REPO / "broker_image"),
                        help="comma-separated broker_image directories to compare")
    parser.add_argument("--kafka", action="store_true",
                        help="read the same records from an Apache Kafka node too")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per tool run")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # unwind: stop the brokers
    sources = [Path(s).resolve() for s in args.source.split(",") if s]
    compare.RilletBroker.executable = compare.runtime_rillet()
    rillet_dir = Path(tempfile.mkdtemp(prefix="consume-cost-"))
    kafka_dir = Path(tempfile.mkdtemp(prefix="consume-cost-kafka-"))
    topic = f"cost-p{args.partitions}"
    brokers: dict[str, compare.Broker] = {str(s): SourceBroker(rillet_dir, s) for s in sources}
    if args.kafka:
        brokers["kafka"] = KeptKafka(kafka_dir)
    results: dict[str, list[Read]] = {name: [] for name in brokers}
    try:
        fill(brokers[str(sources[0])], topic, args)
        if args.kafka:
            fill(brokers["kafka"], topic, args)
        for run in range(args.runs):
            for name in compare.rotated(list(brokers), run):
                broker = brokers[name]
                broker.start(120)
                try:
                    results[name].append(one_read(broker, topic, args.records, args.timeout))
                finally:
                    broker.stop()
                r = results[name][-1]
                print(f"run {run} {name}: {r.cpu_ms_per_mb:.2f} CPU ms/MB (user "
                      f"{r.user_ms_per_mb:.2f}, system {r.system_ms_per_mb:.2f}), fetch "
                      f"{r.fetch_mb_s:.1f} MB/s", flush=True)
    finally:
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(rillet_dir, ignore_errors=True)
        shutil.rmtree(kafka_dir, ignore_errors=True)
    print(f"\n{args.partitions} partitions, {args.records} records of 1 KB, {args.runs} runs "
          f"(median, min-max)")
    for name, rows in results.items():
        costs = [r.cpu_ms_per_mb for r in rows]
        users = [r.user_ms_per_mb for r in rows]
        speeds = [r.fetch_mb_s for r in rows]
        print(f"{name}: broker CPU {statistics.median(costs):.2f} ms/MB "
              f"({min(costs):.2f}-{max(costs):.2f}; user {statistics.median(users):.2f}), "
              f"fetch {statistics.median(speeds):.1f} MB/s "
              f"({min(speeds):.1f}-{max(speeds):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
