"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND, SUBTRACT per key.

APPEND / SUBTRACT apply to list configs (cleanup.policy). v1: flexible.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..config import BrokerConfig
from ..protocol import errors
from ..topic_config import TOPIC_DEFS, effective, render
from .alter_configs import alter_resource
from .registry import RequestContext, api

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _changes(broker_config: BrokerConfig, overrides: Mapping[str, str],
             res: Any) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for c in res.configs:
        op = c.config_operation
        if op == SET:
            changes[c.name] = c.value
        elif op == DELETE:
            changes[c.name] = None
        elif op in (APPEND, SUBTRACT):
            tdef = TOPIC_DEFS.get(c.name)
            if tdef is None or tdef.definition.kind != "list":
                raise errors.InvalidConfig(f"{c.name!r} is not a list config; "
                                           "APPEND/SUBTRACT need one")
            current = list(effective(broker_config, dict(overrides), c.name)[0])
            items = [v.strip() for v in (c.value or "").split(",") if v.strip()]
            if op == APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            changes[c.name] = render(current)
        else:
            raise errors.InvalidRequest(f"unknown config operation {op}")
    return changes


@api(key=44, versions=(0, 1), forward=True)
async def incremental_alter_configs(ctx: RequestContext, req: Any) -> Any:
    out = []
    for res in req.resources:
        def changes_for(overrides: Mapping[str, str], res: Any = res) -> dict[str, str | None]:
            return _changes(ctx.broker.config, overrides, res)
        out.append(await alter_resource(ctx, res, changes_for, False, req.validate_only))
    return ctx.response({"throttle_time": 0, "responses": out})
