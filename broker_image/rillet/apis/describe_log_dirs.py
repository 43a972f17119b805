"""DescribeLogDirs (key 35), v1-4: this broker's log dirs and the partitions in them.

Each broker answers for itself (admin clients ask every broker). Per partition: size
on disk, offset lag (a follower: the leader's high watermark as last fetched minus
our log end; a leader: 0) and is_future_key (always false: no replica moves between
dirs). v2: flexible. v3: top-level error code. v4: total and usable bytes per dir.
A log dir that failed (storage/log_dir_failure.py) is listed with KAFKA_STORAGE_ERROR,
no partitions and no sizes, as Kafka lists an offline dir.
"""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


def _wanted(req: Any) -> set[tuple[str, int]] | None:
    if req.topics is None:
        return None
    return {(t.topic, p) for t in req.topics for p in t.partitions}


def _offset_lag(ctx: RequestContext, tp: tuple[str, int], log_end: int) -> int:
    leader_hw = ctx.broker.replication.leader_high_watermark(tp)
    return 0 if leader_hw is None else max(0, leader_hw - log_end)


def _disk_usage(path: Path) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1, -1
    return usage.total, usage.free


@api(key=35, versions=(1, 4))
async def describe_log_dirs(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    if not ctx.authorized("DESCRIBE", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0, "results": [],
                             "error_code": errors.ClusterAuthorizationFailed.code})
    wanted = _wanted(req)
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {
        Path(d): {} for d in broker.logs.log_dirs}
    for (topic, p), plog in sorted(broker.logs.logs().items()):
        if wanted is not None and (topic, p) not in wanted:
            continue
        topics = by_dir.setdefault(plog.directory.parent, {})
        topics.setdefault(topic, []).append({
            "partition_index": p, "partition_size": plog.size_bytes,
            "offset_lag": _offset_lag(ctx, (topic, p), plog.log_end_offset),
            "is_future_key": False})
    results = []
    for directory, topics in by_dir.items():
        if broker.logs.failures.is_offline(directory):
            results.append({"error_code": errors.KafkaStorageError.code,
                            "log_dir": str(directory.absolute()), "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        # statvfs touches the disk: off the event loop.
        total, usable = await asyncio.to_thread(_disk_usage, directory)
        results.append({"error_code": 0, "log_dir": str(directory.absolute()),
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                        "total_bytes": total, "usable_bytes": usable})
    return ctx.response({"throttle_time": 0, "error_code": 0, "results": results})
