"""AlterPartition (key 56), v2: a partition leader asks the controller to change its ISR.

Served on the controller listener only. The change is checked against the leader and
partition epochs the leader saw (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION), and
only live brokers may join (INELIGIBLE_REPLICA); once committed, every broker learns
the new ISR from the metadata log. v3 adds broker epochs per ISR member (KIP-903).
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=56, versions=(2, 2), scope="controller")
async def alter_partition(ctx: RequestContext, req: Any) -> Any:
    controller = ctx.broker.controller
    topics = []
    for t in req.topics:
        name = controller.image.topic_names.get(t.topic_id)
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0,
                                     "leader_id": -1, "leader_epoch": -1, "isr": [],
                                     "leader_recovery_state": 0, "partition_epoch": -1}
            try:
                if name is None:
                    raise errors.UnknownTopicId(f"no topic with id {t.topic_id}")
                await ctx.broker.channel.alter_partition(
                    name, p.partition_index, req.broker_id, p.leader_epoch, p.partition_epoch,
                    list(p.new_isr))
                part = controller.image.partition(name, p.partition_index)
                if part is not None:
                    entry.update(leader_id=part.leader, leader_epoch=part.leader_epoch,
                                 isr=list(part.isr), partition_epoch=part.partition_epoch)
            except Exception as exc:
                entry["error_code"] = errors.code_of(exc, "alter partition")
            parts.append(entry)
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    return ctx.response({"throttle_time": 0, "error_code": 0, "topics": topics})
