"""JoinGroup (key 11), v0-7: the classic group protocol's join phase.

The request waits until the rebalance completes (every known member
rejoined, the rebalance timeout passed, or group.initial.rebalance.delay.ms
for a new group); the leader gets every member's metadata for the chosen
protocol. Gaps: none known for v0-7.
v0: no rebalance timeout (session timeout used). v1: rebalance timeout.
v2: throttle time. v4: MEMBER_ID_REQUIRED on the first join (KIP-394).
v5: group.instance.id (static membership). v6: flexible.
v7: protocol type in the response.
"""
from __future__ import annotations

from typing import Any

from ..coordinator.group_types import JoinRequest
from ..protocol import errors
from .registry import RequestContext, api


def client_host(ctx: RequestContext) -> str:
    """Kafka reports client hosts as "/<ip>"."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


@api(key=11, versions=(0, 7))
async def join_group(ctx: RequestContext, req: Any) -> Any:
    session_ms = int(req.session_timeout.total_seconds() * 1000)
    rebalance = getattr(req, "rebalance_timeout", None)
    join = JoinRequest(
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000) if rebalance else session_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=ctx.version >= 4)
    try:
        ctx.require("READ", "GROUP", req.group_id)
        result = await ctx.broker.coordinator.join_group(req.group_id, join)
        body: dict[str, Any] = {
            "error_code": result.error, "generation_id": result.generation_id,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
            "leader": result.leader, "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": md}
                        for m, i, md in result.members]}
    except Exception as exc:
        body = {"error_code": errors.code_of(exc, "join group"), "generation_id": -1,
                "protocol_type": None, "protocol_name": None, "leader": "",
                "member_id": req.member_id, "members": []}
    if ctx.version < 7 and body["protocol_name"] is None:
        body["protocol_name"] = ""  # not nullable before v7
    return ctx.response({"throttle_time": 0, **body})
