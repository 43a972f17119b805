"""AssignReplicasToDirs (key 73), v0: a broker tells the controller which log dir holds
which of its replicas (KIP-858). Flexible.

Served on the controller listener only. rillet uses it for one case, Kafka's path for a
failed log dir: replicas assigned to the directory id LOST lose their leadership and ISR
slots (controller/offline_replicas.py); other directory ids are accepted and ignored
(rillet does not track replica placement across dirs). A stale broker epoch gets
STALE_BROKER_EPOCH for the whole request, a node that is not the active controller
NOT_CONTROLLER.
"""
from __future__ import annotations

from typing import Any

from ..controller.offline_replicas import LOST_DIR
from ..protocol import errors
from .registry import RequestContext, api


@api(key=73, versions=(0, 0), scope="controller")
async def assign_replicas_to_dirs(ctx: RequestContext, req: Any) -> Any:
    controller = ctx.broker.controller
    names = controller.image.topic_names
    lost = [(names[t.topic_id], p.partition_index) for d in req.directories
            if d.id_ == LOST_DIR for t in d.topics if t.topic_id in names
            for p in t.partitions]
    try:
        answers = await controller.replicas_offline(int(req.broker_id), int(req.broker_epoch),
                                                    lost) if lost else {}
    except Exception as exc:
        return ctx.response({"throttle_time": 0, "directories": [],
                             "error_code": errors.code_of(exc, "assign replicas to dirs")})

    def code(d: Any, t: Any, index: int) -> int:
        if t.topic_id not in names:
            return errors.UnknownTopicId.code
        answer = answers.get((names[t.topic_id], index)) if d.id_ == LOST_DIR else None
        return 0 if answer is None else answer.code

    return ctx.response({"throttle_time": 0, "error_code": 0, "directories": [
        {"id_": d.id_, "topics": [
            {"topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": code(d, t, p.partition_index)} for p in t.partitions]}
            for t in d.topics]} for d in req.directories]})
