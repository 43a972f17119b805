"""User.spec.quotas: parsed into Kafka's quota keys, and the changes that apply them."""
from __future__ import annotations

import pytest

from rillet_operator.spec import SpecError, parse_user
from rillet_operator.user_quotas import quota_changes, removal, user_entity

BASE = {"cluster": "c", "authentication": {"type": "scram-sha-512"}}


def test_spec_quotas_become_kafka_keys() -> None:
    us = parse_user("alice", "ns", {**BASE, "quotas": {
        "producerByteRate": 1024, "consumerByteRate": 2048, "requestPercentage": 55.5,
        "controllerMutationRate": 10}})
    assert dict(us.quotas) == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0,
                               "request_percentage": 55.5, "controller_mutation_rate": 10.0}
    assert parse_user("alice", "ns", BASE).quotas == ()


@pytest.mark.parametrize("quotas", [{"producerByteRate": 0}, {"consumerByteRate": 1.5},
                                    {"requestPercentage": -1}, {"producerByteRate": True},
                                    {"bogus": 1}])
def test_bad_quotas_are_refused(quotas: dict) -> None:
    with pytest.raises(SpecError):
        parse_user("alice", "ns", {**BASE, "quotas": quotas})


def test_changes_set_what_differs_and_remove_what_was_dropped() -> None:
    assert quota_changes({"producer_byte_rate": 10.0, "request_percentage": 5.0},
                         {"producer_byte_rate": 10.0, "consumer_byte_rate": 7.0,
                          "request_percentage": 1.0}) == {"request_percentage": 5.0,
                                                          "consumer_byte_rate": None}
    assert quota_changes({"producer_byte_rate": 10.0}, {"producer_byte_rate": 10.0}) == {}
    assert removal({"producer_byte_rate": 10.0}) == {"producer_byte_rate": None}


def test_the_entity_is_the_principal_name() -> None:
    assert user_entity("User:alice") == (("user", "alice"),)
    assert user_entity("User:CN=bob") == (("user", "CN=bob"),)
