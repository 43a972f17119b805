"""AlterConfigs (key 33), v0-2: replace a topic's or broker's whole set of overrides.

Broker resources (4) hold the dynamic broker configs (a node id, or "" for the cluster
default; see dynamic_config.py): a key that cannot change live is refused.
v2: flexible.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from ..protocol import errors
from .describe_configs import config_resource
from .registry import RequestContext, api


ChangesFor = Callable[[Mapping[str, str]], dict[str, str | None]]


async def alter_resource(ctx: RequestContext, res: Any, changes_for: ChangesFor,
                         replace_all: bool, validate_only: bool) -> dict[str, Any]:
    """Alter one resource; ``changes_for`` sees the resource's overrides at commit time."""
    entry: dict[str, Any] = {"error_code": 0, "error_message": None,
                             "resource_type": res.resource_type,
                             "resource_name": res.resource_name}
    try:
        ctx.require("ALTER_CONFIGS", *config_resource(res))
        if res.resource_type == TOPIC_RESOURCE:
            await ctx.broker.controller.alter_topic_configs(res.resource_name, changes_for,
                                                            replace_all, validate_only)
        elif res.resource_type == BROKER_RESOURCE:
            await ctx.broker.controller.alter_broker_configs(res.resource_name, changes_for,
                                                             replace_all, validate_only)
        else:
            raise errors.InvalidRequest(
                f"altering resource type {res.resource_type} is not supported")
    except Exception as exc:
        entry.update(error_code=errors.code_of(exc, "alter configs"),
                     error_message=errors.message_of(exc))
    return entry


@api(key=33, versions=(0, 2), forward=True)
async def alter_configs(ctx: RequestContext, req: Any) -> Any:
    out = []
    for res in req.resources:
        changes = {c.name: c.value for c in res.configs}
        out.append(await alter_resource(ctx, res, lambda _current, changes=changes: changes,
                                        True, req.validate_only))
    return ctx.response({"throttle_time": 0, "responses": out})
