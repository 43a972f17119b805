"""Heartbeat (key 12), v0-4: keeps a member's session alive.

REBALANCE_IN_PROGRESS tells a member to rejoin; ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID that it lost its place.
v1: throttle time. v3: group.instance.id. v4: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=12, versions=(0, 4))
async def heartbeat(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("READ", "GROUP", req.group_id)
        code = ctx.broker.coordinator.heartbeat(
            req.group_id, req.member_id, getattr(req, "group_instance_id", None),
            req.generation_id)
    except Exception as exc:
        code = errors.code_of(exc, "heartbeat")
    return ctx.response({"throttle_time": 0, "error_code": code})
