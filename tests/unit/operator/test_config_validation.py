"""spec.config is checked with rillet's own config definitions; a bad key is named."""
from __future__ import annotations

import pytest

from rillet_operator.builders import broker_config as bc
from rillet_operator.spec import SpecError, parse_cluster

CID = "MkU3OEVBNTcwNTJENDM2Qg"


def check(config, replicas=3):
    bc.validate(parse_cluster("c", "ns", {"replicas": replicas, "config": config}), CID)


def test_valid_config_passes():
    check({"min.insync.replicas": 2, "log.retention.ms": "3600000",
           "auto.create.topics.enable": True, "log.cleanup.policy": ["delete", "compact"]})
    check({}, replicas=5)


@pytest.mark.parametrize("config, key", [
    ({"no.such.key": "1"}, "no.such.key"),
    ({"min.insync.replicas": 0}, "min.insync.replicas"),
    ({"num.partitions": "many"}, "num.partitions"),
    ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
    ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
    ({"node.id": 3}, "node.id"),                       # set by the operator
    ({"controller.quorum.voters": "1@x:1"}, "controller.quorum.voters"),
])
def test_invalid_config_names_the_key(config, key):
    with pytest.raises(bc.InvalidConfig) as err:
        check(config)
    assert err.value.key == key
    assert key in str(err.value)


def test_non_scalar_value_is_refused_by_the_parser():
    with pytest.raises(SpecError) as err:
        parse_cluster("c", "ns", {"replicas": 1, "config": {"num.partitions": {"a": 1}}})
    assert err.value.reason == "InvalidConfig" and "num.partitions" in str(err.value)


def test_spec_errors():
    with pytest.raises(SpecError):
        parse_cluster("c", "ns", {"replicas": 0})
    with pytest.raises(SpecError):
        parse_cluster("c", "ns", {"replicas": 1, "storage": {"type": "persistent-claim"}})
