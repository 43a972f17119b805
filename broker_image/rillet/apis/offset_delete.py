"""OffsetDelete (key 47), v0: delete committed offsets of a group.

Allowed for Empty groups, and for partitions of topics no member of a
consumer-protocol group subscribes to (else GROUP_SUBSCRIBED_TO_TOPIC).
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=47, versions=(0, 0))
async def offset_delete(ctx: RequestContext, req: Any) -> Any:
    wanted = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
    try:
        codes = ctx.broker.coordinator.delete_offsets(req.group_id, wanted)
        top = 0
    except Exception as exc:
        top, codes = errors.code_of(exc, "offset delete"), {}
    topics = [{"name": t, "partitions": [{"partition_index": p,
                                          "error_code": codes.get((t, p), 0)}
                                         for p in parts]}
              for t, parts in wanted]
    return ctx.response({"throttle_time": 0, "error_code": top,
                         "topics": topics if not top else []})
