"""CreatePartitions (key 37), v0-3: grow a topic, never shrink it. v2: flexible."""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=37, versions=(0, 3), forward=True)
async def create_partitions(ctx: RequestContext, req: Any) -> Any:
    out = []
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            ctx.require("ALTER", "TOPIC", t.name)
            assignments = ([list(a.broker_ids) for a in t.assignments]
                           if t.assignments else None)
            await ctx.broker.controller.create_partitions(t.name, t.count, assignments,
                                                          req.validate_only)
        except Exception as exc:
            entry.update(error_code=errors.code_of(exc, "create partitions"),
                         error_message=errors.message_of(exc))
        out.append(entry)
    return ctx.response({"throttle_time": 0, "results": out})
