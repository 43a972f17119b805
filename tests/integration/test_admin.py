"""Topic administration through confluent-kafka's AdminClient and raw requests."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewPartitions, NewTopic)

from tests.harness import BrokerProcess
from tests.polling import wait_until

from ..wire import Wire


def _admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_create_describe_delete(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    topic = _name("adm")
    admin.create_topics([NewTopic(topic, 4, 1, config={"retention.ms": "12345"})])[topic] \
        .result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 4
    assert md.cluster_id and md.controller_id == 1
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].is_default
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics
    assert not (broker.data_dir / f"{topic}-0").exists(), "deleted topic left its files"


def test_validate_only_and_bad_requests(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    t = _name("val")
    admin.create_topics([NewTopic(t, 2, 1)], validate_only=True)[t].result(10)
    assert t not in admin.list_topics(timeout=10).topics
    cases = {
        "bad name!": (NewTopic("bad name!", 1, 1), "TOPIC_EXCEPTION"),
        _name("rf"): (None, "INVALID_REPLICATION_FACTOR"),
        _name("cfg"): (None, "INVALID_CONFIG"),
    }
    names = list(cases)
    cases[names[1]] = (NewTopic(names[1], 1, 3), "INVALID_REPLICATION_FACTOR")
    cases[names[2]] = (NewTopic(names[2], 1, 1, config={"retention.ms": "soon"}),
                       "INVALID_CONFIG")
    for name, (new_topic, code) in cases.items():
        with pytest.raises(KafkaException, match=code):
            admin.create_topics([new_topic])[name].result(10)


def test_explicit_assignment_and_partition_growth(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    t = _name("assign")
    admin.create_topics([NewTopic(t, 2, replica_assignment=[[1], [1]])])[t].result(10)
    assert len(admin.list_topics(timeout=10).topics[t].partitions) == 2
    admin.create_partitions([NewPartitions(t, 5)])[t].result(10)
    assert len(admin.list_topics(timeout=10).topics[t].partitions) == 5
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions(t, 3)])[t].result(10)
    bad = _name("badassign")
    with pytest.raises(KafkaException, match="INVALID_REPLICA_ASSIGNMENT"):
        admin.create_topics([NewTopic(bad, 1, replica_assignment=[[7]])])[bad].result(10)


def test_incremental_and_full_alter_configs(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    t = _name("alter")
    admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "1000"})])[t].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([res])[res].result(10)
    desc = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t)])
    configs = list(desc.values())[0].result(10)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["max.message.bytes"].value == "2000"
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    bad = ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([bad])[bad].result(10)


def test_describe_cluster_and_broker_configs(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap) as w:
        resp = w.request(60, 1, {"include_cluster_authorized_operations": False,
                                 "endpoint_type": 1})
        assert resp.error_code == 0 and resp.controller_id == 1
        assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, broker.port)]
        meta = (broker.data_dir / "meta.properties").read_text()
        assert f"cluster.id={resp.cluster_id}" in meta
        described = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                     "configuration_keys": None}],
                                      "include_synonyms": False,
                                      "include_documentation": False})
        configs = {c.name: c.value for c in described.results[0].configs}
        assert configs["listeners"] == f"PLAINTEXT://127.0.0.1:{broker.port}"
        # not set in the config, yet known: the id formatted into meta.properties
        assert configs["cluster.id"] == resp.cluster_id


def test_bad_topic_config_is_explained_in_the_users_terms(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    t = _name("terms")
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "banana"})])[t] \
            .result(10)
    message = str(err.value)
    assert "retention.ms must be a whole number of milliseconds, got 'banana'" in message
    assert "invalid literal" not in message


def test_metadata_auto_create_and_topic_ids(broker: BrokerProcess) -> None:
    t = _name("auto")
    with Wire(broker.bootstrap) as w:
        resp = w.request(3, 12, {"topics": [{"name": t, "topic_id": None}],
                                 "allow_auto_topic_creation": True,
                                 "include_topic_authorized_operations": False})
        topic = resp.topics[0]
        assert topic.error_code == 0 and len(topic.partitions) == 1
        assert topic.partitions[0].leader_id == 1
        by_id = w.request(3, 12, {"topics": [{"name": None, "topic_id": topic.topic_id}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
        assert by_id.topics[0].name == t
        missing = w.request(3, 12, {"topics": [{"name": _name("nope"), "topic_id": None}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert missing.topics[0].error_code == 3


def test_unsupported_version_and_unknown_api_close_only_that_connection(
        broker: BrokerProcess) -> None:
    import struct
    with Wire(broker.bootstrap) as w:
        # Metadata v99 is not served: the connection is closed, with a log line.
        w.send_raw(struct.pack(">ihhih", 10, 3, 99, 1, -1))
        assert w.is_closed()
    with Wire(broker.bootstrap) as w:
        w.send_raw(struct.pack(">ihhih", 10, 999, 0, 1, -1))
        assert w.is_closed()
    wait_until(lambda: "unsupported version 99" in broker.log(), 10, "the log line")
    with Wire(broker.bootstrap) as w:
        assert w.request(18, 3, {"client_software_name": "a",
                                 "client_software_version": "1"}).error_code == 0


def test_regression_huge_partition_count_does_not_stall_the_broker(broker: BrokerProcess) -> None:
    """Found by the protocol fuzzer: a mutated CreateTopics asking for 50 million partitions
    (validate_only) kept the controller busy and the whole broker unresponsive."""
    with Wire(broker.bootstrap, timeout=10) as w:
        for validate_only in (True, False):
            resp = w.request(19, 7, {"topics": [{"name": _name("huge"),
                                                 "num_partitions": 50_000_000,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}],
                                     "timeout": 1000, "validate_only": validate_only})
            assert resp.topics[0].error_code == 37  # INVALID_PARTITIONS
            assert "at most 10000" in resp.topics[0].error_message
        t = _name("grow")
        w.request(19, 7, {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}],
                          "timeout": 1000, "validate_only": False})
        grown = w.request(37, 3, {"topics": [{"name": t, "count": 2**31 - 1,
                                              "assignments": None}],
                                  "timeout": 1000, "validate_only": False})
        assert grown.results[0].error_code == 37
