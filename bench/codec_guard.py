#!/usr/bin/env python3
"""What bounding every length costs: kio's native reader alone beside rillet's guarded reader.

rillet walks each request's layout (rillet/protocol/layout.py) before kio's native reader
decodes it, so no length on the wire can make the native reader allocate more than the frame
holds. This prints, for requests as clients send them, the time to decode header and body with
the native reader, and the time of the bounds check put in front of it (bounds.py). Kafka has no
counterpart to run beside it (its parser bounds lengths as it reads); bench/compare.py shows
the end-to-end effect. Usage:

    .venv/bin/python bench/codec_guard.py [--repeat 2000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from rillet.protocol.build import build  # noqa: E402
from rillet.protocol.bounds import compiled_check  # noqa: E402
from rillet.protocol.codec import encode_request, request_schema  # noqa: E402


def _frame(key: int, version: int, body: dict[str, Any]) -> bytes:
    return encode_request(key, version, 1, "bench", build(request_schema(key, version), body))[4:]


def _partitions(n: int, records: bytes) -> list[dict[str, Any]]:
    return [{"index": i, "records": records} for i in range(n)]


def frames() -> list[tuple[str, bytes]]:
    batch_16k = b"\x00" * 16384
    fetch_parts = [{"partition": i, "current_leader_epoch": 0, "fetch_offset": 1000,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20} for i in range(8)]
    return [
        ("ApiVersions v3", _frame(18, 3, {"client_software_name": "librdkafka",
                                          "client_software_version": "2.3.0"})),
        ("Heartbeat v4", _frame(12, 4, {"group_id": "g", "generation_id": 3,
                                        "member_id": "m-1", "group_instance_id": None})),
        ("Produce v9, 1 x 16 KB", _frame(0, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": "events", "partition_data": _partitions(1, batch_16k)}]})),
        ("Produce v9, 8 x 1 KB", _frame(0, 9, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": "events", "partition_data": _partitions(8, b"\x00" * 1024)}]})),
        ("Fetch v12, 8 partitions", _frame(1, 12, {
            "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 52428800,
            "topics": [{"topic": "events", "partitions": fetch_parts}],
            "forgotten_topics_data": [], "rack_id": ""})),
        ("Metadata v12, 100 topics", _frame(3, 12, {
            "topics": [{"name": f"topic-{i}", "topic_id": None} for i in range(100)],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})),
        ("OffsetCommit v8, 50 partitions", _frame(8, 8, {
            "group_id": "g", "generation_id_or_member_epoch": 3, "member_id": "m-1",
            "group_instance_id": None, "topics": [{"name": "events", "partitions": [
                {"partition_index": i, "committed_offset": 1000, "committed_leader_epoch": 0,
                 "committed_metadata": ""} for i in range(50)]}]})),
    ]


def _readers(frame: bytes) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Decode header and body natively; run the bounds check of header and body."""
    key, version = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
    schema = request_schema(key, version)
    header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    header_reader, body_reader = entity_reader(header_cls), entity_reader(schema)
    header_check, body_check = compiled_check(header_cls), compiled_check(schema)
    end = len(frame)

    def decode() -> Any:
        _, used = header_reader(frame, 0)
        return body_reader(frame, used)

    def check() -> int:
        return body_check(frame, header_check(frame, 0, end), end)

    return decode, check


def _time(fn: Callable[[], Any], repeat: int) -> float:
    """Median microseconds of one call, over ``repeat`` calls in 5 runs."""
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        runs.append((time.perf_counter() - started) / repeat * 1e6)
    return statistics.median(runs)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args(argv)
    print(f"{'request':<32} {'bytes':>7} {'native decode µs':>17} {'check µs':>9} "
          f"{'check/decode':>13}")
    for name, frame in frames():
        decode, check = _readers(frame)
        native, bounds = _time(decode, args.repeat), _time(check, args.repeat)
        print(f"{name:<32} {len(frame):>7} {native:>17.2f} {bounds:>9.2f} "
              f"{bounds / native:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
