"""OffsetForLeaderEpoch (key 23), v2-4: end offset of a leader epoch.

Consumers use it to validate positions after a leader change (and
followers, later, to find where to truncate). v2: current leader epoch.
v3: replica id. v4: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


def _end_offset(ctx: RequestContext, topic: str, p: Any) -> dict[str, Any]:
    entry = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
    try:
        ctx.require("DESCRIBE", "TOPIC", topic)
        plog = ctx.broker.replication.leader_log(topic, p.partition, p.current_leader_epoch)
        epoch, end = plog.end_offset_for_epoch(p.leader_epoch)
        if epoch == -1 and p.leader_epoch >= 0 and plog.log_end_offset == plog.log_start_offset:
            # Empty log: the requested epoch ends where the log ends.
            epoch, end = p.leader_epoch, plog.log_end_offset
        entry.update(leader_epoch=epoch, end_offset=end)
    except Exception as exc:
        entry["error_code"] = errors.code_of(exc, "offset for leader epoch")
    return entry


@api(key=23, versions=(2, 4))
async def offset_for_leader_epoch(ctx: RequestContext, req: Any) -> Any:
    topics = [{"topic": t.topic, "partitions": [_end_offset(ctx, t.topic, p)
                                                for p in t.partitions]}
              for t in req.topics]
    return ctx.response({"throttle_time": 0, "topics": topics})
