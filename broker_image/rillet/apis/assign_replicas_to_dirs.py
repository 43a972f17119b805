"""AssignReplicasToDirs (key 73), v0: a broker tells the controller which log dir holds
which of its replicas (KIP-858). Flexible.

Served on the controller listener only. The controller records each replica's directory id
in its partition's metadata (controller/replica_dirs.py); the directory id LOST (a failed
log dir) also takes the replica's leadership and ISR slot away. A stale broker epoch gets
STALE_BROKER_EPOCH for the whole request, a node that is not the active controller
NOT_CONTROLLER; an unknown topic id UNKNOWN_TOPIC_ID for its partitions.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=73, versions=(0, 0), scope="controller")
async def assign_replicas_to_dirs(ctx: RequestContext, req: Any) -> Any:
    controller = ctx.broker.controller
    names = controller.image.topic_names
    # One directory per replica: a replica named under two takes the last.
    wanted = {(names[t.topic_id], int(p.partition_index)): d.id_ for d in req.directories
              for t in d.topics if t.topic_id in names for p in t.partitions}
    try:
        answers = await controller.assign_replicas_to_dirs(
            int(req.broker_id), int(req.broker_epoch), wanted) if wanted else {}
    except Exception as exc:
        return ctx.response({"throttle_time": 0, "directories": [],
                             "error_code": errors.code_of(exc, "assign replicas to dirs")})

    def code(t: Any, index: int) -> int:
        if t.topic_id not in names:
            return errors.UnknownTopicId.code
        answer = answers.get((names[t.topic_id], index))
        return 0 if answer is None else answer.code

    return ctx.response({"throttle_time": 0, "error_code": 0, "directories": [
        {"id_": d.id_, "topics": [
            {"topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": code(t, p.partition_index)} for p in t.partitions]}
            for t in d.topics]} for d in req.directories]})
