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


def test_two_bad_keys_are_reported_together():
    """Issue 32: only the first bad key was reported; a user fixed one per reconcile."""
    with pytest.raises(bc.InvalidConfig) as err:
        check({"no.such.key": "1", "min.insync.replicas": 0, "log.retention.ms": 1000})
    assert set(err.value.keys) == {"no.such.key", "min.insync.replicas"}
    assert "no.such.key" in str(err.value) and "min.insync.replicas" in str(err.value)
    assert "log.retention.ms" not in str(err.value)


def _warnings(config, replicas):
    return bc.config_warnings(parse_cluster("c", "ns", {"replicas": replicas, "config": config}))


def test_settings_the_cluster_size_cannot_carry_are_warnings():
    """min.insync.replicas 5 on one broker starts (the broker accepts it) but no acks=all write
    could succeed: a warning, the Cluster stays Ready."""
    check({"min.insync.replicas": 5}, replicas=1)          # valid: no InvalidConfig
    (warning,) = _warnings({"min.insync.replicas": 5}, 1)
    assert "min.insync.replicas 5 exceeds the cluster's 1 broker" in warning
    both = _warnings({"min.insync.replicas": 4, "default.replication.factor": 4}, 3)
    assert [w.split()[0] for w in both] == ["min.insync.replicas", "default.replication.factor"]
    assert "offsets.topic.replication.factor" in _warnings(
        {"offsets.topic.replication.factor": 5}, 3)[0]


def test_min_isr_above_the_default_replication_factor_is_a_warning():
    (warning,) = _warnings({"min.insync.replicas": 2}, 3)   # default.replication.factor 1
    assert "exceeds default.replication.factor 1" in warning
    assert _warnings({"min.insync.replicas": 2, "default.replication.factor": 3}, 3) == []
    assert _warnings({}, 1) == []
