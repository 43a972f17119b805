"""Kafka's controller RPCs as plain values: the request bodies a broker sends the active
controller, and the answers read back into the controller's own result types.

Pure: the transport is controller/channel.py's, the one path to the active controller.
"""
from __future__ import annotations

import uuid
from typing import Any

from ..client.connection import raise_for
from ..protocol import errors
from .controller import BrokerState
from .topics import TopicResult, TopicSpec

CREATE_TOPICS, CREATE_TOPICS_VERSION = 19, 7
ALTER_PARTITION, ALTER_PARTITION_VERSION = 56, 2
BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
# Kafka's SecurityProtocol ids, as BrokerRegistration carries them.
PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def create_topics_body(specs: list[TopicSpec], validate_only: bool) -> dict[str, Any]:
    return {"timeout": 30000, "validate_only": validate_only, "topics": [
        {"name": s.name, "num_partitions": s.num_partitions,
         "replication_factor": s.replication_factor,
         "assignments": [{"partition_index": p, "broker_ids": b}
                         for p, b in sorted(s.assignments.items())],
         "configs": [{"name": k, "value": v} for k, v in s.configs.items()]}
        for s in specs]}


def topic_results(resp: Any) -> list[TopicResult]:
    results = []
    for t in resp.topics:
        code = int(t.error_code)
        error = errors.error_for_code(code)(t.error_message or "") if code else None
        results.append(TopicResult(t.name, t.topic_id, error, t.num_partitions,
                                   t.replication_factor))
    return results


def alter_partition_body(topic_id: uuid.UUID, partition: int, leader_id: int,
                         leader_epoch: int, partition_epoch: int,
                         new_isr: list[int]) -> dict[str, Any]:
    return {"broker_id": leader_id, "broker_epoch": -1, "topics": [{
        "topic_id": topic_id, "partitions": [{
            "partition_index": partition, "leader_epoch": leader_epoch,
            "new_isr": new_isr, "leader_recovery_state": 0,
            "partition_epoch": partition_epoch}]}]}


def check_alter_partition(resp: Any) -> None:
    raise_for(resp.error_code, "alter partition")
    raise_for(resp.topics[0].partitions[0].error_code, "alter partition")


def heartbeat_state(resp: Any) -> BrokerState:
    raise_for(resp.error_code, "broker heartbeat")
    return BrokerState(bool(resp.is_caught_up), bool(resp.is_fenced),
                       bool(resp.should_shut_down))
