"""Quota entities: Kafka's precedence order, validation, DescribeClientQuotas filters."""
from __future__ import annotations

import pytest

from rillet.protocol import errors
from rillet.quotas.entity import (MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT, FilterComponent,
                                  entity_of, filter_matches, resolve, validate_entity,
                                  validate_filter, validate_value)

P = "producer_byte_rate"
ALL_LEVELS = {
    entity_of({"user": "alice", "client-id": "app"}): {P: 1.0},
    entity_of({"user": "alice", "client-id": None}): {P: 2.0},
    entity_of({"user": "alice"}): {P: 3.0},
    entity_of({"user": None, "client-id": "app"}): {P: 4.0},
    entity_of({"user": None, "client-id": None}): {P: 5.0},
    entity_of({"user": None}): {P: 6.0},
    entity_of({"client-id": "app"}): {P: 7.0},
    entity_of({"client-id": None}): {P: 8.0},
}


def test_precedence_follows_kafka_from_most_to_least_specific() -> None:
    quotas = dict(ALL_LEVELS)
    seen = []
    for entity in list(ALL_LEVELS):
        match = resolve(quotas, P, "alice", "app")
        assert match is not None
        seen.append(match.bound)
        del quotas[entity]
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert resolve(quotas, P, "alice", "app") is None


def test_each_key_is_resolved_on_its_own() -> None:
    quotas = {entity_of({"user": "alice"}): {P: 3.0},
              entity_of({"client-id": None}): {P: 8.0, "consumer_byte_rate": 9.0}}
    assert resolve(quotas, "consumer_byte_rate", "alice", "x").bound == 9.0
    assert resolve(quotas, P, "alice", "x").bound == 3.0


def test_tags_name_the_group_that_shares_the_quota() -> None:
    # A user quota holds all its clients together; a default holds each user apart.
    quotas = {entity_of({"user": "alice"}): {P: 3.0}, entity_of({"user": None}): {P: 6.0},
              entity_of({"client-id": None}): {"consumer_byte_rate": 1.0}}
    assert resolve(quotas, P, "alice", "a").tags == ("alice", "")
    assert resolve(quotas, P, "bob", "b").tags == ("bob", "")
    assert resolve(quotas, "consumer_byte_rate", "bob", "b").tags == ("", "b")


def test_other_users_and_clients_do_not_match() -> None:
    quotas = {entity_of({"user": "alice"}): {P: 3.0}, entity_of({"client-id": "app"}): {P: 7.0}}
    assert resolve(quotas, P, "bob", "other") is None
    assert resolve(quotas, P, "bob", "app").bound == 7.0


@pytest.mark.parametrize("pairs", [[], [("user", "a"), ("user", "b")], [("group", "g")],
                                   [("ip", "1.2.3.4")], [("user", "")]])
def test_invalid_entities_are_refused(pairs: list) -> None:
    with pytest.raises(errors.InvalidRequest):
        validate_entity(pairs)


def test_entity_has_one_spelling() -> None:
    assert validate_entity([("user", "u"), ("client-id", None)]) == \
        validate_entity([("client-id", None), ("user", "u")])


@pytest.mark.parametrize("key,value", [("producer_byte_rate", 1.5), ("producer_byte_rate", 0),
                                       ("request_percentage", -1), ("nope", 1),
                                       ("consumer_byte_rate", float("nan"))])
def test_invalid_values_are_refused(key: str, value: float) -> None:
    with pytest.raises(errors.InvalidRequest):
        validate_value(key, value)


def test_valid_values_pass() -> None:
    validate_value("producer_byte_rate", 1024.0)
    validate_value("request_percentage", 12.5)
    validate_value("controller_mutation_rate", 0.5)


def test_filters_match_exact_default_and_any_strict_or_not() -> None:
    both = entity_of({"user": "alice", "client-id": None})
    user_only = entity_of({"user": "alice"})
    any_user = [FilterComponent("user", MATCH_ANY)]
    assert filter_matches(both, any_user, strict=False)
    assert not filter_matches(both, any_user, strict=True)
    assert filter_matches(user_only, any_user, strict=True)
    assert filter_matches(user_only, [FilterComponent("user", MATCH_EXACT, "alice")], True)
    assert not filter_matches(user_only, [FilterComponent("user", MATCH_DEFAULT)], False)
    assert filter_matches(both, [FilterComponent("client-id", MATCH_DEFAULT)], False)
    assert filter_matches(both, [], strict=False) and not filter_matches(both, [], True)


def test_bad_filters_are_refused() -> None:
    with pytest.raises(errors.InvalidRequest):
        validate_filter([FilterComponent("user", MATCH_ANY), FilterComponent("user", 0, "a")])
    with pytest.raises(errors.InvalidRequest):
        validate_filter([FilterComponent("user", MATCH_EXACT, None)])
    with pytest.raises(errors.InvalidRequest):
        validate_filter([FilterComponent("user", 7)])
