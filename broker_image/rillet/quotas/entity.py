"""Client quota entities, keys and Kafka's precedence order (KIP-13, KIP-55, KIP-546). Pure.

An entity is a user, a client id, or both; each component names one (``"alice"``) or the
default (None, shown by Kafka's tools as ``<default>``). An entity is kept as a tuple of
(type, name) pairs sorted by type, so one entity has one spelling. Which quota holds a
connection of user U with client id C is decided per key, by the first of these entities
that sets that key (Kafka's documented order):

    /users/U/clients/C, /users/U/clients/<default>, /users/U,
    /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
    /clients/C, /clients/<default>

The quota found is shared by every connection it matches: a quota on /users/U holds all
of U's clients together; one on /users/<default> holds each user apart. ``QuotaMatch.tags``
names that group (Kafka's quota metric tags): the user when the entity has a user
component, the client id when it has a client component, "" otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from ..protocol import errors

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Key -> whether its value must be a whole number (byte rates are longs in Kafka).
QUOTA_KEYS: Mapping[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                                  REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}

Entity = tuple[tuple[str, "str | None"], ...]


def entity_of(components: Mapping[str, str | None]) -> Entity:
    """The one spelling of an entity given as {type: name or None}."""
    return tuple(sorted(components.items()))


def validate_entity(pairs: list[tuple[str, str | None]]) -> Entity:
    """The entity of an AlterClientQuotas entry; raises InvalidRequest for what Kafka
    refuses: no component, a type named twice, an unknown type, an empty name, and a
    combination other than user, client id, or user with client id. IP quotas
    (connection_creation_rate, KIP-612) are not served."""
    types = [t for t, _ in pairs]
    if not pairs:
        raise errors.InvalidRequest("a quota entity needs at least one component")
    if len(set(types)) != len(types):
        raise errors.InvalidRequest(f"entity type named twice in {types}")
    for kind, name in pairs:
        if kind == IP:
            raise errors.InvalidRequest("ip quotas (connection_creation_rate) are not "
                                        "supported")
        if kind not in ENTITY_TYPES:
            raise errors.InvalidRequest(f"unknown entity type {kind!r}")
        if name == "":
            raise errors.InvalidRequest(f"empty {kind} name (null names the default)")
    return entity_of(dict(pairs))


def validate_value(key: str, value: float) -> None:
    """Raise InvalidRequest for an unknown key or a value Kafka would refuse."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise errors.InvalidRequest(f"unknown quota key {key!r}; known: "
                                    f"{', '.join(QUOTA_KEYS)}")
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise errors.InvalidRequest(f"{key} must be a positive number, got {value}")
    if whole and value != int(value):
        raise errors.InvalidRequest(f"{key} must be a whole number, got {value}")


def precedence(user: str, client_id: str) -> tuple[Entity, ...]:
    """The entities that may hold (user, client_id), most specific first."""
    return (((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)),
            ((USER, user),), ((CLIENT_ID, client_id), (USER, None)),
            ((CLIENT_ID, None), (USER, None)), ((USER, None),),
            ((CLIENT_ID, client_id),), ((CLIENT_ID, None),))


@dataclass(frozen=True)
class QuotaMatch:
    """The quota that holds a client: its bound, the entity it is set on, the sharing group."""
    bound: float
    entity: Entity
    tags: tuple[str, str]   # (user, client id) of the group sharing the quota


def resolve(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
            client_id: str) -> QuotaMatch | None:
    """The quota ``key`` that holds (user, client_id), or None (unlimited)."""
    for entity in precedence(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            kinds = dict(entity)
            return QuotaMatch(values[key], entity,
                              (user if USER in kinds else "",
                               client_id if CLIENT_ID in kinds else ""))
    return None


# -- DescribeClientQuotas filters -----------------------------------------------------------

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


@dataclass(frozen=True)
class FilterComponent:
    """One component of a DescribeClientQuotas filter: an entity type and how to match it."""
    entity_type: str
    match_type: int
    match: str | None = None

    def matches(self, name: str | None) -> bool:
        if self.match_type == MATCH_EXACT:
            return name is not None and name == self.match
        if self.match_type == MATCH_DEFAULT:
            return name is None
        return True


def validate_filter(components: list[FilterComponent]) -> None:
    """Raise InvalidRequest for a filter Kafka refuses: a type twice, an unknown match type,
    an exact match without a name."""
    types = [c.entity_type for c in components]
    if len(set(types)) != len(types):
        raise errors.InvalidRequest(f"entity type named twice in the filter {types}")
    for c in components:
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise errors.InvalidRequest(f"unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise errors.InvalidRequest(f"an exact match of {c.entity_type} needs a name")


def filter_matches(entity: Entity, components: list[FilterComponent], strict: bool) -> bool:
    """Whether ``entity`` answers the filter: every component finds its type with a name it
    matches; strict: the entity has no other component."""
    names = dict(entity)
    for c in components:
        if c.entity_type not in names or not c.matches(names[c.entity_type]):
            return False
    return not strict or len(names) == len(components)
