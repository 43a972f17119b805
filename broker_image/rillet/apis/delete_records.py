"""DeleteRecords (key 21), v0-2: move a partition's log start offset forward.

Sent to each partition's leader (what `kafka-delete-records` does). Records below the
offset (-1: the high watermark; never past it) disappear for readers at once and whole
segments below it are deleted; followers follow the leader's log start from its fetch
responses. The answer's low watermark is the leader's new log start (Kafka waits for every
replica to get there; rillet answers once the leader has).
v1: same. v2: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api

HIGH_WATERMARK = -1


@api(key=21, versions=(0, 2))
async def delete_records(ctx: RequestContext, req: Any) -> Any:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1,
                                     "error_code": 0}
            try:
                ctx.require("DELETE", "TOPIC", t.name)
                plog = ctx.broker.replication.leader_log(t.name, p.partition_index)
                target = plog.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if target < 0 or target > plog.high_watermark:
                    raise errors.OffsetOutOfRange(
                        f"cannot delete {t.name}-{p.partition_index} up to {p.offset}: the high "
                        f"watermark is {plog.high_watermark}")
                plog.advance_log_start(target)
                entry["low_watermark"] = plog.log_start_offset
            except Exception as exc:
                entry["error_code"] = errors.code_of(exc, "delete records")
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return ctx.response({"throttle_time": 0, "topics": topics})
