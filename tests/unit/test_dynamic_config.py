"""Dynamic broker configs: decisions (records), layering, sources and synonyms."""
from __future__ import annotations

import pytest

from rillet.apis.describe_configs import broker_synonyms
from rillet.defs.broker_config import BrokerConfig
from rillet.controller.broker_configs import decide_broker_configs
from rillet.dynamic_config import (DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, effective_config)
from rillet.metadata.image import BROKER_RESOURCE, MetadataImage, replay
from rillet.protocol import errors
from rillet.defs.topic_defs import validate_topic_configs
from rillet.topic_config import effective


def _apply(image: MetadataImage, name: str, changes: dict, replace_all: bool = False
           ) -> MetadataImage:
    records = decide_broker_configs(image, name, lambda _cur: changes, replace_all)
    return replay(image, records, image.offset + 1)


def test_set_delete_and_replace_per_broker_and_default() -> None:
    image = MetadataImage(cluster_id="c")
    image = _apply(image, "1", {"leader.replication.throttled.rate": "1000"})
    image = _apply(image, "", {"log.retention.ms": "60000",
                               "follower.replication.throttled.rate": "5"})
    assert image.configs[(BROKER_RESOURCE, "1")] == {"leader.replication.throttled.rate": "1000"}
    assert image.configs[(BROKER_RESOURCE, "")] == {"log.retention.ms": "60000",
                                                    "follower.replication.throttled.rate": "5"}
    image = _apply(image, "", {"log.retention.ms": None})
    assert image.configs[(BROKER_RESOURCE, "")] == {"follower.replication.throttled.rate": "5"}
    # AlterConfigs replaces the whole set.
    image = _apply(image, "", {"log.retention.bytes": "100"}, replace_all=True)
    assert image.configs[(BROKER_RESOURCE, "")] == {"log.retention.bytes": "100"}
    # Setting what is already there writes nothing.
    assert decide_broker_configs(image, "", lambda _c: {"log.retention.bytes": "100"},
                                 False) == []


def test_non_dynamic_and_unknown_keys_are_refused_by_name_and_nothing_is_stored() -> None:
    image = MetadataImage(cluster_id="c")
    for key in ("num.io.threads", "listeners", "no.such.key"):
        with pytest.raises(errors.InvalidRequest, match=key.replace(".", r"\.")):
            decide_broker_configs(image, "1", lambda _c, key=key: {
                "log.retention.ms": "1", key: "2"}, False)


def test_removing_a_key_that_is_not_set_is_accepted_whatever_the_key() -> None:
    # kafka-reassign-partitions --verify clears every throttle key it knows, set or not.
    image = _apply(MetadataImage(cluster_id="c"), "1", {"leader.replication.throttled.rate": "9"})
    image = _apply(image, "1", {"leader.replication.throttled.rate": None,
                                "replica.alter.log.dirs.io.max.bytes.per.second": None})
    assert (BROKER_RESOURCE, "1") not in image.configs
    with pytest.raises(errors.InvalidRequest, match="replica.alter.log.dirs"):
        _apply(image, "1", {"replica.alter.log.dirs.io.max.bytes.per.second": "5"})


def test_bad_values_are_invalid_config_naming_the_key() -> None:
    image = MetadataImage(cluster_id="c")
    with pytest.raises(errors.InvalidConfig, match="leader.replication.throttled.rate"):
        decide_broker_configs(image, "1", lambda _c: {
            "leader.replication.throttled.rate": "-5"}, False)
    with pytest.raises(errors.InvalidConfig, match="log.retention.ms"):
        decide_broker_configs(image, "", lambda _c: {"log.retention.ms": "soon"}, False)


def test_resource_name_is_a_node_id_or_empty() -> None:
    with pytest.raises(errors.InvalidRequest, match="node id"):
        decide_broker_configs(MetadataImage(cluster_id="c"), "broker-1",
                              lambda _c: {"log.retention.ms": "1"}, False)


def test_precedence_per_broker_then_default_then_static_then_default() -> None:
    static = BrokerConfig.load(overrides={"node.id": "1", "log.retention.bytes": "777",
                                          "min.insync.replicas": "2"})
    image = MetadataImage(cluster_id="c")
    image = _apply(image, "", {"log.retention.bytes": "888", "log.retention.ms": "5000"})
    image = _apply(image, "1", {"log.retention.ms": "6000"})
    image = _apply(image, "2", {"log.retention.ms": "7000"})   # another broker's
    config = effective_config(static, image, 1)
    assert config["log.retention.ms"] == 6000 and config.retention_ms == 6000
    assert config.source_of("log.retention.ms") == DYNAMIC_BROKER
    assert config["log.retention.bytes"] == 888
    assert config.source_of("log.retention.bytes") == DYNAMIC_DEFAULT_BROKER
    assert config["min.insync.replicas"] == 2 and config.source_of("min.insync.replicas") == 4
    assert config.source_of("log.segment.bytes") == 5
    # Topics without an override follow, and say where the value came from.
    assert effective(config, {}, "retention.ms") == (6000, DYNAMIC_BROKER)
    assert effective(config, {}, "retention.bytes") == (888, DYNAMIC_DEFAULT_BROKER)
    assert effective(config, {"retention.ms": "1"}, "retention.ms")[0] == 1
    assert effective_config(static, MetadataImage(cluster_id="c"), 1) is static


def test_synonyms_list_dynamic_layers_first() -> None:
    static = BrokerConfig.load(overrides={"log.retention.ms": "100"})
    image = _apply(_apply(MetadataImage(cluster_id="c"), "", {"log.retention.ms": "200"}),
                   "1", {"log.retention.ms": "300"})
    config = effective_config(static, image, 1)
    assert [(s["name"], s["value"], s["source"])
            for s in broker_synonyms(config, "log.retention.ms")] == [
        ("log.retention.ms", "300", 2), ("log.retention.ms", "200", 3),
        ("log.retention.ms", "100", 4), ("log.retention.hours", "168", 5)]


def test_throttled_replicas_topic_configs_are_validated() -> None:
    ok = {"leader.replication.throttled.replicas": "0:1, 1:2",
          "follower.replication.throttled.replicas": "*"}
    assert validate_topic_configs(ok) == ok
    validate_topic_configs({"leader.replication.throttled.replicas": ""})
    for bad in ("0-1", "*,0:1", "a:1", "0:1:2"):
        with pytest.raises(ValueError, match="follower.replication.throttled.replicas"):
            validate_topic_configs({"follower.replication.throttled.replicas": bad})
