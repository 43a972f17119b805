"""BrokerHeartbeat (key 63), v0-v1: a registered broker reports it is alive.

Served on the controller listener only. The answer says whether the broker is
caught up and fenced, and whether a controlled shutdown may proceed.
v1 adds the directory ids of its offline log dirs (OfflineLogDirs, KIP-858): the
controller moves leadership off the replicas assigned to them (controller/replica_dirs.py).
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=63, versions=(0, 1), scope="controller")
async def broker_heartbeat(ctx: RequestContext, req: Any) -> Any:
    try:
        state = await ctx.broker.controller.broker_heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_shut_down,
            frozenset(d for d in getattr(req, "offline_log_dirs", ()) if d is not None))
        return ctx.response({"throttle_time": 0, "error_code": 0,
                             "is_caught_up": state.caught_up, "is_fenced": state.fenced,
                             "should_shut_down": state.should_shut_down})
    except Exception as exc:
        return ctx.response({"throttle_time": 0, "is_caught_up": False, "is_fenced": True,
                             "should_shut_down": False,
                             "error_code": errors.code_of(exc, "broker heartbeat")})
