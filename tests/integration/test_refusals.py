"""What rillet refuses, it refuses with the error code Kafka clients know."""
from __future__ import annotations

import uuid

from tests.harness import BrokerProcess

from ..wire import Wire
from .clients import create_topic

INVALID_TRANSACTION_TIMEOUT = 50
TOPIC_DELETION_DISABLED = 73
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_ENDPOINT_TYPE = 119


def test_topic_deletion_disabled_keeps_the_topic(broker_factory) -> None:
    b: BrokerProcess = broker_factory({"delete.topic.enable": "false"})
    topic = f"keep-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, partitions=1)
    with Wire(b.bootstrap) as w:
        resp = w.request(20, 4, {"topic_names": [topic], "timeout_ms": 5000})
        [result] = resp.responses
        assert result.error_code == TOPIC_DELETION_DISABLED
        meta = w.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        assert meta.topics[0].error_code == 0, "the topic must still exist"


def test_an_auto_create_the_controller_refuses_is_not_promised(broker_factory) -> None:
    """Auto-creation refused for good (three replicas on one broker) answers
    UNKNOWN_TOPIC_OR_PARTITION, not the retriable LEADER_NOT_AVAILABLE of a topic on its way:
    a client would otherwise wait for a topic that never comes."""
    b: BrokerProcess = broker_factory({"default.replication.factor": "3"})
    topic = f"never-{uuid.uuid4().hex[:6]}"
    with Wire(b.bootstrap) as w:
        meta = w.request(3, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        assert meta.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert "auto-creating topic " + topic + " refused" in b.log()


def test_out_of_range_transaction_timeouts_and_controller_endpoints_are_refused(
        broker: BrokerProcess) -> None:
    """Transactions are served (test_txn_coordinator.py); what Kafka refuses of them is
    refused the same way: a timeout of 0 or past transaction.max.timeout.ms."""
    with Wire(broker.bootstrap) as w:
        for timeout_ms in (0, 900_001):
            pid = w.request(22, 4, {"transactional_id": "tx-1",
                                    "transaction_timeout": timeout_ms,
                                    "producer_id": -1, "producer_epoch": -1})
            assert pid.error_code == INVALID_TRANSACTION_TIMEOUT, timeout_ms
            assert pid.producer_id == -1
        cluster = w.request(60, 1, {"include_cluster_authorized_operations": False,
                                    "endpoint_type": 2})
        assert cluster.error_code == UNSUPPORTED_ENDPOINT_TYPE and cluster.brokers == ()
