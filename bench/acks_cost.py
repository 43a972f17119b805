#!/usr/bin/env python3
"""What acks=all costs a single rillet node beside acks=1: producer MB/s and broker CPU.

On one node the leader is the whole ISR, so both settings should cost the same. Each source
(a `broker_image` dir, as in bench/startup.py) gets one fresh node; on it, Kafka's
kafka-producer-perf-test (compare.py's invocation: 1 KB records, unthrottled, acks=all is the
Java default's idempotent producer, acks=1 a plain one) sends --records to a fresh topic per
case and round, for 1 and 8 partitions, the cases rotated between rounds and the sources
interleaved. Besides the tool's MB/s it prints the broker's CPU microseconds per record
(schedstat of every broker thread, before and after the run), which other processes' load
inflates far less than the wall clock on a shared machine. --split-idempotence adds acks=1
with an idempotent producer and acks=all with a plain one, to tell what acks=all costs from
what idempotence (its default companion) costs; --partitions picks the partition counts.

    .venv/bin/python bench/acks_cost.py [--records 100000] [--rounds 3] [--source DIR ...]
                                        [--split-idempotence] [--partitions 1,8]
"""
from __future__ import annotations

import argparse
import signal
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import create_topic, producer_perf  # noqa: E402
from measurements import rotated  # noqa: E402
from processes import cpu_seconds  # noqa: E402
from startup import (add_source_options, running_broker,  # noqa: E402
                     sources_to_run)

# (acks, idempotence: "" the client's default for that acks, else enable.idempotence's value)
SETTINGS = [("1", ""), ("all", "")]
SPLIT_SETTINGS = [("1", "true"), ("all", "false")]
Case = tuple[str, str, int]   # acks, idempotence, partitions


def cases(args: argparse.Namespace) -> list[Case]:
    settings = SETTINGS + (SPLIT_SETTINGS if args.split_idempotence else [])
    return [(acks, idem, int(p)) for p in args.partitions.split(",") for acks, idem in settings]


def label(case: Case) -> str:
    acks, idem, partitions = case
    kind = {"": "", "true": " idempotent", "false": " not idempotent"}[idem]
    return f"acks={acks}{kind} {partitions} partition(s)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    add_source_options(parser)
    parser.add_argument("--step-timeout", type=float, default=600.0)
    parser.add_argument("--split-idempotence", action="store_true",
                        help="also acks=1 idempotent and acks=all not idempotent")
    parser.add_argument("--partitions", default="1,8", help="comma-separated partition counts")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the ExitStack stops every broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    pythons = sources_to_run(args)
    sources = list(pythons)
    # (source, case) -> [(MB/s, broker CPU us per record)]
    seen: dict[tuple[Path, Case], list[tuple[float, float]]] = {}
    with ExitStack() as stack:
        brokers = {source: stack.enter_context(running_broker(pythons[source], source, [], 60.0))
                   for source in sources}
        for round_no in range(args.rounds):
            for case in rotated(cases(args), round_no):
                acks, idem, partitions = case
                extra = ["--command-property", f"enable.idempotence={idem}"] if idem else []
                for source in rotated(sources, round_no):
                    proc, bootstrap, _ = brokers[source]
                    topic = f"acks{acks}{idem}-p{partitions}-r{round_no}"
                    create_topic(bootstrap, topic, partitions)
                    before = cpu_seconds(proc.pid)
                    result = producer_perf(bootstrap, topic, args.records, acks, -1,
                                           args.step_timeout, *extra)
                    cpu_us = (cpu_seconds(proc.pid) - before) * 1e6 / args.records
                    seen.setdefault((source, case), []).append((result["mb_s"], cpu_us))
                    print(f"  round {round_no} {label(case)} {source}: "
                          f"{result['mb_s']:.1f} MB/s, {cpu_us:.1f} us/record", file=sys.stderr)
    print(f"produce, {args.records} x 1 KB records per run, median (min-max) of {args.rounds} "
          f"rounds ({args.rillet_env} venv):")
    for source in sources:
        print(f"  {source}")
        for case in cases(args):
            runs = seen[(source, case)]
            mb = [m for m, _ in runs]
            cpu = statistics.median(c for _, c in runs)
            print(f"    {label(case):<42} "
                  f"{statistics.median(mb):6.1f} MB/s ({min(mb):.1f}-{max(mb):.1f}), "
                  f"broker CPU {cpu:6.1f} us/record")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
