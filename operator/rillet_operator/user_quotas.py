"""A User's client quotas: the changes that make the cluster's match the spec. Pure.

The spec is the truth, as with ACLs and Topic configs: a quota in the spec is set on the
User's principal (Kafka's user entity: the principal's name), one the spec no longer has is
removed, and a User whose principal changed (another authentication type) or that is
deleted takes all its quotas along.
"""
from __future__ import annotations

from typing import Mapping

Entity = tuple[tuple[str, "str | None"], ...]


def user_entity(principal: str) -> Entity:
    """The quota entity of a principal ("User:alice" -> user "alice")."""
    return (("user", principal.removeprefix("User:")),)


def quota_changes(desired: Mapping[str, float], current: Mapping[str, float]
                  ) -> dict[str, float | None]:
    """key -> the value to set, or None to remove it; empty when they already match."""
    changes: dict[str, float | None] = {k: v for k, v in desired.items()
                                        if current.get(k) != v}
    changes.update({k: None for k in current if k not in desired})
    return changes


def removal(current: Mapping[str, float]) -> dict[str, float | None]:
    """The changes removing every quota held."""
    return dict.fromkeys(current)
