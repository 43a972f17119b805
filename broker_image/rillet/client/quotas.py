"""Client quotas of one entity through an AdminClient: what the operator's User handler
manages, with the requests `kafka-configs --entity-type users` sends (DescribeClientQuotas,
AlterClientQuotas; KIP-546).
"""
from __future__ import annotations

from typing import Mapping

from .admin import AdminClient
from .connection import raise_for

DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
MATCH_EXACT = 0
Entity = tuple[tuple[str, "str | None"], ...]


async def describe_quotas(admin: AdminClient, entity: Entity) -> dict[str, float]:
    """The quota values set on exactly ``entity`` (empty: none)."""
    resp = await admin.request(DESCRIBE_QUOTAS, 1, {"strict": True, "components": [
        {"entity_type": kind, "match_type": MATCH_EXACT, "match": name}
        for kind, name in entity]})
    raise_for(resp.error_code, "describe client quotas", resp.error_message)
    wanted = dict(entity)
    for entry in resp.entries or ():
        if {e.entity_type: e.entity_name for e in entry.entity} == wanted:
            return {v.key: float(v.value) for v in entry.values}
    return {}


async def alter_quotas(admin: AdminClient, entity: Entity,
                       changes: Mapping[str, float | None]) -> None:
    """Set each key to its value, or remove it (None)."""
    if not changes:
        return
    resp = await admin.request(ALTER_QUOTAS, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
        "ops": [{"key": key, "value": 0.0 if value is None else float(value),
                 "remove": value is None} for key, value in sorted(changes.items())]}]})
    for entry in resp.entries:
        raise_for(entry.error_code, f"alter client quotas of {dict(entity)}",
                  entry.error_message)
