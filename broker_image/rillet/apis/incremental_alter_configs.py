"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND, SUBTRACT per key.

APPEND / SUBTRACT apply to list configs (cleanup.policy, log.cleanup.policy), starting
from the resource's current value. Topics (2) and dynamic broker configs (4). v1: flexible.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..defs.broker_config import BrokerConfig
from ..defs.broker_defs import BROKER_DEFS, parse_value
from ..metadata.image import BROKER_RESOURCE
from ..protocol import errors
from ..defs.topic_defs import TOPIC_DEFS
from ..topic_config import effective, render
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
            current = _current_list(broker_config, overrides, res.resource_type, c.name)
            items = [v.strip() for v in (c.value or "").split(",") if v.strip()]
            if op == APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            changes[c.name] = render(current)
        else:
            raise errors.InvalidRequest(f"unknown config operation {op}")
    return changes


def _current_list(broker_config: BrokerConfig, overrides: Mapping[str, str],
                  resource_type: int, name: str) -> list[str]:
    """The list APPEND / SUBTRACT start from: the resource's value of list config `name`."""
    if resource_type == BROKER_RESOURCE:
        d = BROKER_DEFS.get(name)
        if d is not None and d.kind == "list":
            # The value stored at this level, else what the broker runs with.
            raw = overrides.get(name)
            return list(broker_config[name] if raw is None else parse_value(d, raw))
    else:
        tdef = TOPIC_DEFS.get(name)
        if tdef is not None and tdef.definition.kind == "list":
            return list(effective(broker_config, dict(overrides), name)[0])
    raise errors.InvalidConfig(f"{name!r} is not a list config; APPEND/SUBTRACT need one")


@api(key=44, versions=(0, 1), forward=True)
async def incremental_alter_configs(ctx: RequestContext, req: Any) -> Any:
    out = []
    for res in req.resources:
        def changes_for(overrides: Mapping[str, str], res: Any = res) -> dict[str, str | None]:
            return _changes(ctx.broker.config, overrides, res)
        out.append(await alter_resource(ctx, res, changes_for, False, req.validate_only))
    return ctx.response({"throttle_time": 0, "responses": out})
