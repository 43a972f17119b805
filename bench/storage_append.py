#!/usr/bin/env python3
"""Micro benchmark of the storage hot path: parse_batches + PartitionLog.append (+ flush), and reads.

Each append is one RecordBatch v2 of 100 records x 1 KB (about 100 KB), as a
producer with batching on sends it. Scenarios: the default flush policy (page
cache only, Kafka's default), flush.messages=1 (every append fsynced in a
worker thread before the next one, what acks need for power-loss durability),
and a zstd-compressed batch. Also 1-record batches (per-append overhead). Then a sequential read of the whole log with
1 MB fetches. Bounded: --appends batches per scenario (default 2000, 300 with
fsync), one run each, in a temporary directory removed afterwards.

    .venv/bin/python bench/storage_append.py [--appends N] [--dir PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rillet.records import Compression, Record, encode_batch, parse_batches
from rillet.storage.log import PartitionLog
from rillet.storage.log_config import LogConfig

RECORDS_PER_BATCH = 100
RECORD_BYTES = 1024


def make_batch(compression: Compression, count: int = RECORDS_PER_BATCH) -> bytearray:
    # hex of random bytes: distinct per record and about 2:1 compressible, like text payloads
    records = [Record(i, 1_700_000_000_000 + i, b"key-%d" % i, os.urandom(RECORD_BYTES // 2).hex().encode())
               for i in range(count)]
    return bytearray(encode_batch(records, compression=compression, producer_id=-1))


async def run_appends(directory: Path, config: LogConfig, batch: bytearray, count: int,
                      flush_each: bool) -> dict[str, float]:
    per_batch = parse_batches(batch)[0].records_count
    plog = PartitionLog.open(directory, config)
    latencies = []
    started = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        headers = parse_batches(batch)  # the buffer is reused: set_offsets overwrites in place
        plog.append(batch, headers, leader_epoch=0)
        plog.high_watermark = plog.log_end_offset
        if flush_each:
            await plog.maybe_flush()
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    size = plog.size_bytes
    await plog.flush()
    plog.close()
    latencies.sort()
    return {
        "appends": count,
        "records/s": count * per_batch / elapsed,
        "appends/s": count / elapsed,
        "MB/s": size / elapsed / 1e6,
        "p50 us": statistics.median(latencies) * 1e6,
        "p99 us": latencies[int(len(latencies) * 0.99) - 1] * 1e6,
    }


def run_reads(directory: Path, config: LogConfig) -> dict[str, float]:
    plog = PartitionLog.open(directory, config)
    offset, total, reads = plog.log_start_offset, 0, 0
    latencies = []
    started = time.perf_counter()
    while offset < plog.log_end_offset:
        t0 = time.perf_counter()
        data = plog.read(offset, 1 << 20)
        headers = parse_batches(data, verify_crc=False)
        latencies.append(time.perf_counter() - t0)
        offset = headers[-1].next_offset
        total += len(data)
        reads += 1
    elapsed = time.perf_counter() - started
    plog.close()
    latencies.sort()
    return {
        "appends": reads,
        "records/s": offset / elapsed,
        "appends/s": reads / elapsed,
        "MB/s": total / elapsed / 1e6,
        "p50 us": statistics.median(latencies) * 1e6,
        "p99 us": latencies[int(len(latencies) * 0.99) - 1] * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--fsync-appends", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None, help="parent dir for the data (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rillet-bench-", dir=args.dir))
    try:
        plain, zstd = make_batch(Compression.NONE), make_batch(Compression.ZSTD)
        scenarios = [
            ("append, default flush policy", root / "a-0", LogConfig(), plain, args.appends, False),
            ("append, flush.messages=1", root / "b-0", LogConfig(flush_messages=1), plain, args.fsync_appends, True),
            ("append zstd, default policy", root / "c-0", LogConfig(), zstd, args.appends, False),
            ("append 1-record batches", root / "d-0", LogConfig(), make_batch(Compression.NONE, 1),
             args.appends * 10, False),
            ("append 1-record, flush.messages=1", root / "e-0", LogConfig(flush_messages=1),
             make_batch(Compression.NONE, 1), args.fsync_appends, True),
        ]
        rows = []
        for name, directory, config, batch, count, flush_each in scenarios:
            rows.append((name, asyncio.run(run_appends(directory, config, batch, count, flush_each))))
        rows.append(("read 1 MB fetches (from a-0)", run_reads(root / "a-0", LogConfig())))
        print(f"batch: {RECORDS_PER_BATCH} records x {RECORD_BYTES} B = {len(plain)} B uncompressed, "
              f"{len(zstd)} B zstd; data in {root}")
        header = f"{'scenario':34} {'ops':>6} {'records/s':>11} {'ops/s':>9} {'MB/s':>8} {'p50 us':>8} {'p99 us':>9}"
        print(header)
        print("-" * len(header))
        for name, r in rows:
            print(f"{name:34} {r['appends']:>6} {r['records/s']:>11,.0f} {r['appends/s']:>9,.0f} "
                  f"{r['MB/s']:>8,.1f} {r['p50 us']:>8,.0f} {r['p99 us']:>9,.0f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
