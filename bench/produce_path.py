#!/usr/bin/env python3
"""The broker's produce path alone, in-process: CPU per Produce request, acks=1 beside acks=all.

A single node (its own one-voter quorum) runs in this process; Produce v11 frames are built
beforehand and handed to the dispatcher one after another (no sockets, no client), so the
figures are the broker's own work per request, and the same batches cost the same unless the
acks setting makes them. Variants, interleaved round by round:

- acks=1 and acks=all with the same plain batches (no producer id): what acks=all adds;
- acks=all idempotent (a producer id from InitProducerId and running sequences, what the Java
  client sends by default): what idempotence adds on top;

each for one partition (one batch per request) and eight (eight batches per request). A batch
is 15 records of 1 KB, about what the Java producer's 16 KB batch.size holds. Prints per
variant the median over rounds of CPU microseconds per request (process time, which other
load on the machine inflates far less than the wall clock). --profile VARIANT writes a cProfile
(timed in CPU time too) of that variant's last round to produce_path.prof.

    .venv/bin/python bench/produce_path.py [--requests 1000] [--rounds 5] [--profile all-p1]
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rillet.apis import load_all
from rillet.broker import Broker
from rillet.defs.broker_config import BrokerConfig
from rillet.dispatch import dispatch_frame
from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_request, request_schema
from rillet.records import Record, encode_batch

PRODUCE, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 19, 22
PRODUCE_VERSION = 11
RECORDS_PER_BATCH = 15
RECORD_BYTES = 1024
# (name, acks, idempotent, partitions)
VARIANTS = [(f"{name}-p{parts}", acks, idem, parts)
            for parts in (1, 8)
            for name, acks, idem in (("acks1", 1, False), ("all", -1, False),
                                     ("all-idempotent", -1, True))]


def frame(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    schema = request_schema(api_key, version)
    return encode_request(api_key, version, correlation_id, "bench", build(schema, body))[4:]


async def call(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    raw = await dispatch_frame(broker, frame(api_key, version, body), "bench", 1)
    assert isinstance(raw, bytes)
    return decode_response(api_key, version, raw[4:])[1]


def produce_frames(topic: str, acks: int, partitions: int, count: int,
                   producer: tuple[int, int] | None) -> list[bytes]:
    """`count` Produce requests, each one batch per partition; with a producer, the batches
    carry its id and epoch and sequences that follow on from one request to the next."""
    payload = bytes(RECORD_BYTES)
    records = [Record(i, 1_700_000_000_000 + i, None, payload) for i in range(RECORDS_PER_BATCH)]
    plain = encode_batch(records)
    frames = []
    for n in range(count):
        data = []
        for p in range(partitions):
            batch = plain if producer is None else encode_batch(
                records, producer_id=producer[0], producer_epoch=producer[1],
                base_sequence=n * RECORDS_PER_BATCH)
            data.append({"index": p, "records": batch})
        body = {"transactional_id": None, "acks": acks, "timeout": 30000,
                "topic_data": [{"name": topic, "partition_data": data}]}
        frames.append(frame(PRODUCE, PRODUCE_VERSION, body, correlation_id=n))
    return frames


async def create_topic(broker: Broker, name: str, partitions: int) -> None:
    await call(broker, CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout": 30000, "validate_only": False})
    deadline = time.monotonic() + 30
    while not all((name, p) in broker.replication.leaders for p in range(partitions)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: no leader role after 30 s")
        await asyncio.sleep(0.01)


async def run_frames(broker: Broker, frames: list[bytes]) -> float:
    """CPU seconds the dispatcher spent on `frames`, one after another."""
    started = time.process_time()
    for raw in frames:
        answer = await dispatch_frame(broker, raw, "bench", 1)
        assert answer is not None
    return time.process_time() - started


async def main_async(args: argparse.Namespace, data_dir: Path) -> dict[str, list[float]]:
    load_all()
    config = BrokerConfig.load(None, {"log.dirs": str(data_dir),
                                      "listeners": "PLAINTEXT://127.0.0.1:9",
                                      "group.initial.rebalance.delay.ms": "0"})
    broker = Broker(config)
    await broker.start()
    seen: dict[str, list[float]] = {name: [] for name, *_ in VARIANTS}
    try:
        pid = await call(broker, INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": -1,
            "producer_id": -1, "producer_epoch": -1})
        producer = (pid.producer_id, pid.producer_epoch)
        for round_no in range(args.rounds):
            k = round_no % len(VARIANTS)
            for name, acks, idempotent, parts in VARIANTS[k:] + VARIANTS[:k]:
                topic = f"{name}-r{round_no}"
                await create_topic(broker, topic, parts)
                frames = produce_frames(topic, acks, parts, args.requests,
                                        producer if idempotent else None)
                if args.profile == name and round_no == args.rounds - 1:
                    # CPU time, not the wall clock: the machine may be shared.
                    profiler = cProfile.Profile(time.process_time)
                    profiler.enable()
                    cpu = await run_frames(broker, frames)
                    profiler.disable()
                    profiler.dump_stats("produce_path.prof")
                else:
                    cpu = await run_frames(broker, frames)
                seen[name].append(cpu * 1e6 / args.requests)
    finally:
        await broker.stop()
    return seen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", choices=[name for name, *_ in VARIANTS])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="rillet-produce-path-") as tmp:
        seen = asyncio.run(main_async(args, Path(tmp)))
    print(f"Produce v{PRODUCE_VERSION} through the dispatcher, {args.requests} requests of "
          f"{RECORDS_PER_BATCH} x {RECORD_BYTES} B per partition, median (min-max) CPU us per "
          f"request over {args.rounds} rounds:")
    for name, runs in seen.items():
        print(f"  {name:<22} {statistics.median(runs):7.1f}  ({min(runs):.1f}-{max(runs):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
