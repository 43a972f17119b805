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
        ctx.require("DELETE", "GROUP", req.group_id)
        denied = {t for t, _ in wanted if not ctx.authorized("READ", "TOPIC", t)}
        codes = ctx.broker.coordinator.delete_offsets(
            req.group_id, [(t, parts) for t, parts in wanted if t not in denied])
        codes.update({(t, p): errors.TopicAuthorizationFailed.code
                      for t, parts in wanted if t in denied for p in parts})
        top = 0
    except Exception as exc:
        top, codes = errors.code_of(exc, "offset delete"), {}
    topics = [{"name": t, "partitions": [{"partition_index": p,
                                          "error_code": codes.get((t, p), 0)}
                                         for p in parts]}
              for t, parts in wanted]
    return ctx.response({"throttle_time": 0, "error_code": top,
                         "topics": topics if not top else []})
