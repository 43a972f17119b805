"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1: client quotas
(KIP-546), what `kafka-configs --entity-type users|clients --describe` and `--alter
--add-config producer_byte_rate=...` send.

Quotas are kept in the metadata log (quotas/alter.py decides, every node replays them);
the broker enforces them in quotas/manager.py. Describing needs DESCRIBE_CONFIGS on the
cluster, altering ALTER_CONFIGS, as in Kafka. User and client-id entities and their
combination are served; ip entities (connection_creation_rate) are refused.
v1: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from ..quotas.alter import QuotaEntry, QuotaOp
from ..quotas.entity import (Entity, FilterComponent, filter_matches, validate_filter)
from ..metadata.image import MetadataImage
from .registry import CLUSTER, RequestContext, api


def _entity_data(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


@api(key=48, versions=(0, 1))
async def describe_client_quotas(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorized("DESCRIBE_CONFIGS", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0, "entries": None,
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "error_message": "DESCRIBE_CONFIGS on the cluster is not allowed"})
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match)
                  for c in req.components]
    try:
        validate_filter(components)
    except errors.KafkaError as exc:
        return ctx.response({"throttle_time": 0, "entries": None, "error_code": exc.code,
                             "error_message": exc.message})
    quotas = ctx.broker.image.client_quotas
    entries = [{"entity": _entity_data(entity),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in sorted(quotas.items(), key=lambda kv: repr(kv[0]))
               if filter_matches(entity, components, req.strict)]
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "entries": entries})


def _settled(image: MetadataImage, req: Any, resp: Any) -> bool:
    """A relayed alteration is visible here once every applied op shows in this image."""
    for entry, result in zip(req.entries, resp.entries):
        if result.error_code != 0 or req.validate_only:
            continue
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
        values = image.client_quotas.get(entity, {})
        for op in entry.ops:
            if (op.key in values) == op.remove or (not op.remove and values[op.key] != op.value):
                return False
    return True


@api(key=49, versions=(0, 1), forward=True, settled=_settled)
async def alter_client_quotas(ctx: RequestContext, req: Any) -> Any:
    entries = [QuotaEntry(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                          tuple(QuotaOp(op.key, float(op.value), op.remove)
                                for op in entry.ops))
               for entry in req.entries]
    outcome: list[Any]
    if not ctx.authorized("ALTER_CONFIGS", "CLUSTER", CLUSTER):
        outcome = [errors.ClusterAuthorizationFailed("ALTER_CONFIGS on the cluster is not "
                                                     "allowed")] * len(entries)
    else:
        try:
            outcome = await ctx.broker.controller.alter_client_quotas(entries,
                                                                      req.validate_only)
        except Exception as exc:   # the controller could not decide: every entry says why
            outcome = [exc] * len(entries)
    return ctx.response({"throttle_time": 0, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entry.components],
         "error_code": 0 if exc is None else errors.code_of(exc, "alter client quotas"),
         "error_message": None if exc is None else errors.message_of(exc)}
        for entry, exc in zip(entries, outcome)]})
