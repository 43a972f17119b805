"""Kafka's controller RPCs as plain values: the request bodies a broker sends the active
controller, and the answers read back into the controller's own result types.

Pure: the transport is controller/channel.py's, the one path to the active controller.
"""
from __future__ import annotations

import uuid
from typing import Any, Mapping, Sequence

from ..client.connection import raise_for
from ..protocol import errors
from .controller import BrokerState
from .isr import IsrAnswer, IsrChange
from .topics import TopicResult, TopicSpec

# Each RPC with the versions its body and answer are written for here: the channel sends
# the highest of them that the controller serves too (controller/versions.py).
CREATE_TOPICS, CREATE_TOPICS_VERSIONS = 19, (7, 7)   # topic ids in the answer: v7+
ALTER_PARTITION, ALTER_PARTITION_VERSIONS = 56, (2, 2)   # topic ids: v2+; v3 is KIP-903's
# v2 / v1 add KIP-858's log dirs; below, the controller learns them by AssignReplicasToDirs.
BROKER_REGISTRATION, BROKER_REGISTRATION_VERSIONS = 62, (0, 2)
BROKER_HEARTBEAT, BROKER_HEARTBEAT_VERSIONS = 63, (0, 1)
ASSIGN_REPLICAS_TO_DIRS, ASSIGN_REPLICAS_TO_DIRS_VERSIONS = 73, (0, 0)
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


def alter_partition_body(leader_id: int, changes: Sequence[IsrChange],
                         topic_ids: Mapping[str, uuid.UUID]) -> dict[str, Any]:
    """One AlterPartition request carrying every change, grouped by topic (first-seen order).
    `topic_ids` must name every topic of `changes`."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for c in changes:
        topics.setdefault(c.topic, []).append({
            "partition_index": c.partition, "leader_epoch": c.leader_epoch,
            "new_isr": list(c.new_isr), "leader_recovery_state": 0,
            "partition_epoch": c.partition_epoch})
    return {"broker_id": leader_id, "broker_epoch": -1, "topics": [
        {"topic_id": topic_ids[name], "partitions": parts} for name, parts in topics.items()]}


def alter_partition_answers(resp: Any, changes: Sequence[IsrChange],
                            topic_ids: Mapping[str, uuid.UUID]) -> list[IsrAnswer]:
    """One answer per change, in order, from the controller's response: the request's
    error for all when it has one, else each partition's own; a partition the response
    leaves out is answered as not attempted (UNKNOWN_SERVER_ERROR, retried)."""
    if resp.error_code:
        error = errors.error_for_code(int(resp.error_code))("alter partition")
        return [error for _ in changes]
    codes: dict[tuple[uuid.UUID, int], int] = {}
    for t in resp.topics:
        for p in t.partitions:
            codes[(t.topic_id, int(p.partition_index))] = int(p.error_code)
    answers: list[IsrAnswer] = []
    for c in changes:
        code = codes.get((topic_ids[c.topic], c.partition))
        if code is None:
            answers.append(errors.UnknownServerError(
                f"{c.topic}-{c.partition} is missing from the AlterPartition response"))
        else:
            answers.append(errors.error_for_code(code)("alter partition") if code else None)
    return answers


def assignments_body(node_id: int, broker_epoch: int,
                     assignments: Mapping[tuple[str, int], uuid.UUID],
                     topic_ids: Mapping[str, uuid.UUID]) -> dict[str, Any]:
    """AssignReplicasToDirs: each replica of `assignments` is in that directory id."""
    dirs: dict[uuid.UUID, dict[str, list[dict[str, Any]]]] = {}
    for (topic, p), directory in assignments.items():
        dirs.setdefault(directory, {}).setdefault(topic, []).append({"partition_index": p})
    return {"broker_id": node_id, "broker_epoch": broker_epoch, "directories": [
        {"id_": d, "topics": [{"topic_id": topic_ids[t], "partitions": ps}
                              for t, ps in topics.items()]} for d, topics in dirs.items()]}


def assignments_answers(resp: Any, topic_ids: Mapping[str, uuid.UUID]
                          ) -> dict[tuple[str, int], errors.KafkaError | None]:
    """The controller's answer per partition (raises the request's own error)."""
    raise_for(resp.error_code, "assign replicas to dirs")
    names = {i: name for name, i in topic_ids.items()}
    return {(names[t.topic_id], int(p.partition_index)):
            errors.error_for_code(int(p.error_code))("assign replicas to dirs")
            if p.error_code else None
            for d in resp.directories for t in d.topics if t.topic_id in names
            for p in t.partitions}


def heartbeat_state(resp: Any) -> BrokerState:
    raise_for(resp.error_code, "broker heartbeat")
    return BrokerState(bool(resp.is_caught_up), bool(resp.is_fenced),
                       bool(resp.should_shut_down))
