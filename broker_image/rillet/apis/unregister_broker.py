"""UnregisterBroker (key 64), v0: forget a broker that holds no replica. Flexible.

Forwarded to the active controller (controller/brokers.py decides). An unknown
broker gets BROKER_ID_NOT_REGISTERED; one still named by partitions gets
INVALID_REQUEST with the partitions in the message.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


@api(key=64, versions=(0, 0), forward=True)
async def unregister_broker(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("ALTER", "CLUSTER", CLUSTER)
        await ctx.broker.controller.unregister_broker(int(req.broker_id))
    except Exception as exc:
        return ctx.response({"throttle_time": 0,
                             "error_code": errors.code_of(exc, "unregister broker"),
                             "error_message": errors.message_of(exc)})
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None})
