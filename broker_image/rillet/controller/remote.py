"""Asking the active controller, from a node that is not it, over Kafka's own RPCs.

Internal callers (auto-creation, the group coordinator, a partition leader
changing its ISR) on a follower node send the request a client would send to
the quorum leader's controller listener, and read the answer back into the
controller's own result types.
"""
from __future__ import annotations

import uuid
from typing import Any

from ..client.connection import raise_for
from ..protocol import errors
from .topics import TopicResult, TopicSpec

CREATE_TOPICS = 19
ALTER_PARTITION = 56


async def create_topics(raft: Any, specs: list[TopicSpec],
                        validate_only: bool) -> list[TopicResult]:
    body = {"timeout": 30000, "validate_only": validate_only, "topics": [
        {"name": s.name, "num_partitions": s.num_partitions,
         "replication_factor": s.replication_factor,
         "assignments": [{"partition_index": p, "broker_ids": b}
                         for p, b in sorted(s.assignments.items())],
         "configs": [{"name": k, "value": v} for k, v in s.configs.items()]}
        for s in specs]}
    try:
        resp = await raft.connection(raft.leader_id, "admin").request(CREATE_TOPICS, 7, body)
    except Exception as exc:
        return [TopicResult(s.name, error=errors.NotController(
            f"controller unreachable: {exc}")) for s in specs]
    results = []
    for t in resp.topics:
        code = int(t.error_code)
        error = errors.error_for_code(code)(t.error_message or "") if code else None
        results.append(TopicResult(t.name, t.topic_id, error, t.num_partitions,
                                   t.replication_factor))
    return results


async def alter_partition(raft: Any, topic_id: uuid.UUID, partition: int, leader_id: int,
                          leader_epoch: int, partition_epoch: int, new_isr: list[int]) -> None:
    leader = raft.leader_id
    if leader is None:
        raise errors.NotController("no active controller known yet")
    resp = await raft.connection(leader, "alter").request(ALTER_PARTITION, 2, {
        "broker_id": leader_id, "broker_epoch": -1, "topics": [{
            "topic_id": topic_id, "partitions": [{
                "partition_index": partition, "leader_epoch": leader_epoch,
                "new_isr": new_isr, "leader_recovery_state": 0,
                "partition_epoch": partition_epoch}]}]})
    raise_for(resp.error_code, "alter partition")
    raise_for(resp.topics[0].partitions[0].error_code, "alter partition")
