"""LeaveGroup (key 13), v0-4: members leave, the group rebalances without waiting for expiry.

v0-2: one member id, one top-level error. v1: throttle time. v3: batch of
members (by member id and/or group.instance.id), an error per member.
v4: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=13, versions=(0, 4))
async def leave_group(ctx: RequestContext, req: Any) -> Any:
    identities: list[tuple[str, str | None]]
    if ctx.version < 3:
        identities = [(req.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
    try:
        ctx.require("READ", "GROUP", req.group_id)
        codes = ctx.broker.coordinator.leave_group(req.group_id, identities)
        top = 0
    except Exception as exc:
        codes, top = [], errors.code_of(exc, "leave group")
    if ctx.version < 3:
        return ctx.response({"throttle_time": 0, "error_code": top or codes[0]})
    members = [{"member_id": mid, "group_instance_id": iid, "error_code": code}
               for (mid, iid), code in zip(identities, codes)]
    return ctx.response({"throttle_time": 0, "error_code": top, "members": members})
