"""DescribeGroups (key 15), v0-5: state, protocol and members of groups.

An unknown group is described as Dead with no error (as Kafka before v6).
Member metadata and assignments are only reported while the group is
Stable, as Kafka does. v1: throttle time. v3: authorized operations, when
asked for (none without DESCRIBE on the group).
v4: group.instance.id. v5: flexible.
"""
from __future__ import annotations

from typing import Any

from ..coordinator.group_types import GroupState
from ..protocol import errors
from .registry import OPERATIONS_UNSET, RequestContext, api


def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"error_code": 0, "group_id": group_id, "group_state": "Dead",
                             "protocol_type": "", "protocol_data": "", "members": [],
                             "authorized_operations": OPERATIONS_UNSET}
    try:
        ctx.require("DESCRIBE", "GROUP", group_id)
        group = ctx.broker.coordinator.describe_group(group_id)
    except Exception as exc:
        entry.update(error_code=errors.code_of(exc, "describe group"), group_state="")
        return entry
    if with_operations:
        entry["authorized_operations"] = ctx.authorized_operations("GROUP", group_id)
    if group is None:
        return entry
    stable = group.state == GroupState.STABLE
    entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                 protocol_data=(group.protocol_name or "") if stable else "")
    entry["members"] = [{
        "member_id": m.member_id, "group_instance_id": m.group_instance_id,
        "client_id": m.client_id, "client_host": m.client_host,
        "member_metadata": m.metadata(group.protocol_name) if stable else b"",
        "member_assignment": m.assignment if stable else b""}
        for m in group.members.values()]
    return entry


@api(key=15, versions=(0, 5))
async def describe_groups(ctx: RequestContext, req: Any) -> Any:
    with_operations = bool(getattr(req, "include_authorized_operations", False))
    return ctx.response({"throttle_time": 0,
                         "groups": [_describe(ctx, g, with_operations) for g in req.groups]})
