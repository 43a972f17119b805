"""DeleteGroups (key 42), v0-2: remove empty groups and their committed offsets.

NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown
groups. v1: same as v0. v2: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


def _delete(ctx: RequestContext, group_id: str) -> int:
    try:
        ctx.require("DELETE", "GROUP", group_id)
        ctx.broker.coordinator.delete_group(group_id)
        return 0
    except Exception as exc:
        return errors.code_of(exc, "delete group")


@api(key=42, versions=(0, 2))
async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    return ctx.response({"throttle_time": 0, "results": [
        {"group_id": g, "error_code": _delete(ctx, g)} for g in req.groups_names]})
