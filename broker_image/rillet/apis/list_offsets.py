"""ListOffsets (key 2), v1-7.

Earliest (-2) = log start offset, latest (-1) = high watermark, or with
isolation_level 1 (READ_COMMITTED) the last stable offset; max timestamp (-3, v7), or the
first record whose timestamp is at or after the given one (below the same bound).
v1: single offset. v2: isolation level. v4: leader epochs. v6: flexible.
v7: max timestamp.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1


def _lookup(ctx: RequestContext, topic: str, p: Any, isolation: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0,
                             "timestamp": -1, "offset": -1, "leader_epoch": -1}
    try:
        ctx.require("DESCRIBE", "TOPIC", topic)
        part, plog = ctx.broker.replication.leader_partition(topic, p.partition_index,
                                                 getattr(p, "current_leader_epoch", -1))
        epoch = part.leader_epoch
        ts = p.timestamp
        bound = plog.last_stable_offset if isolation == READ_COMMITTED else plog.high_watermark
        if ts == LATEST:
            entry.update(offset=bound, leader_epoch=epoch)
        elif ts == EARLIEST:
            entry.update(offset=plog.log_start_offset, leader_epoch=epoch)
        elif ts == MAX_TIMESTAMP:
            found = plog.max_timestamp()
            if found is not None:
                entry.update(offset=found[0], timestamp=found[1], leader_epoch=epoch)
        elif ts < 0:
            raise errors.InvalidRequest(f"unsupported ListOffsets timestamp {ts}")
        else:
            found = plog.offset_for_timestamp(ts)
            if found is not None and found[0] < bound:
                entry.update(offset=found[0], timestamp=found[1], leader_epoch=epoch)
    except Exception as exc:
        entry["error_code"] = errors.code_of(exc, "list offsets")
    return entry


@api(key=2, versions=(1, 7))
async def list_offsets(ctx: RequestContext, req: Any) -> Any:
    await ctx.await_topics(t.name for t in req.topics)
    isolation = getattr(req, "isolation_level", 0)
    topics = [{"name": t.name,
               "partitions": [_lookup(ctx, t.name, p, isolation) for p in t.partitions]}
              for t in req.topics]
    return ctx.response({"throttle_time": 0, "topics": topics})
