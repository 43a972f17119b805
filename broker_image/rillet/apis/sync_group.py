"""SyncGroup (key 14), v0-5: the leader hands in assignments, every member gets its own.

Followers wait until the leader's SyncGroup arrives (or the group starts
rebalancing again). v1: throttle time. v3: group.instance.id. v4: flexible.
v5: protocol type and name, checked against the group's.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=14, versions=(0, 5))
async def sync_group(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("READ", "GROUP", req.group_id)
        result = await ctx.broker.coordinator.sync_group(
            req.group_id, req.member_id, getattr(req, "group_instance_id", None),
            req.generation_id, getattr(req, "protocol_type", None),
            getattr(req, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in req.assignments})
        body: dict[str, Any] = {"error_code": result.error,
                                "protocol_type": result.protocol_type,
                                "protocol_name": result.protocol_name,
                                "assignment": result.assignment}
    except Exception as exc:
        body = {"error_code": errors.code_of(exc, "sync group"), "assignment": b""}
    return ctx.response({"throttle_time": 0, **body})
