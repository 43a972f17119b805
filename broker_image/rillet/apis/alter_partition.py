"""AlterPartition (key 56), v2: a partition leader asks the controller to change ISRs.

Served on the controller listener only. One request carries every ISR change a leader
has queued, over many topics and partitions (replication/alter_partition_manager.py);
the controller checks each partition on its own against the leader and partition epochs
the leader saw (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, only live brokers may join:
INELIGIBLE_REPLICA) and commits the accepted ones as one metadata batch
(controller/isr.py). A node that is not the active controller answers NOT_CONTROLLER for
the whole request. v3 adds broker epochs per ISR member (KIP-903); v2's request-level
broker_epoch is not checked.
"""
from __future__ import annotations

from typing import Any

from ..controller.isr import IsrAnswer, IsrChange
from ..metadata.image import MetadataImage
from ..protocol import errors
from .registry import RequestContext, api


@api(key=56, versions=(2, 2), scope="controller")
async def alter_partition(ctx: RequestContext, req: Any) -> Any:
    controller = ctx.broker.controller
    names = controller.image.topic_names
    changes: list[IsrChange] = []
    for t in req.topics:
        name = names.get(t.topic_id)
        if name is not None:
            changes.extend(IsrChange(name, p.partition_index, p.leader_epoch,
                                     p.partition_epoch, tuple(p.new_isr))
                           for p in t.partitions)
    try:
        answers = iter(await controller.alter_partitions(req.broker_id, changes)
                       if changes else [])
    except Exception as exc:
        return ctx.response({"throttle_time": 0, "topics": [],
                             "error_code": errors.code_of(exc, "alter partition")})
    image = controller.image
    topics = []
    for t in req.topics:
        name = names.get(t.topic_id)
        parts = []
        for p in t.partitions:
            answer: IsrAnswer = (next(answers) if name is not None else
                                 errors.UnknownTopicId(f"no topic with id {t.topic_id}"))
            parts.append(_partition_entry(image, name, p.partition_index, answer))
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    return ctx.response({"throttle_time": 0, "error_code": 0, "topics": topics})


def _partition_entry(image: MetadataImage, name: str | None, index: int, answer: IsrAnswer
                     ) -> dict[str, Any]:
    """A partition's answer: its state as committed when accepted, its error when not."""
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "leader_id": -1,
                             "leader_epoch": -1, "isr": [], "leader_recovery_state": 0,
                             "partition_epoch": -1}
    if answer is not None:
        entry["error_code"] = answer.code
        return entry
    part = None if name is None else image.partition(name, index)
    if part is not None:
        entry.update(leader_id=part.leader, leader_epoch=part.leader_epoch,
                     isr=list(part.isr), partition_epoch=part.partition_epoch)
    return entry
