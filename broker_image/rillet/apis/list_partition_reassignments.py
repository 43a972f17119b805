"""ListPartitionReassignments (key 46), v0: the moves in progress (KIP-455).

Answered by the active controller (other nodes relay the request) from its metadata
image: per partition, the current (union) replicas and the adding and removing ones.
Topics or partitions that do not exist or are not moving are left out, as in Kafka.
v0: flexible.
"""
from __future__ import annotations

from typing import Any

from ..controller.controller import ACTIVE_WAIT_S
from ..controller.reassignment import ongoing
from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


@api(key=46, versions=(0, 0), forward=True)
async def list_partition_reassignments(ctx: RequestContext, req: Any) -> Any:
    controller = ctx.broker.controller
    raft = controller.raft
    if not ctx.authorized("DESCRIBE", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0, "topics": [],
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "error_message": "DESCRIBE on the cluster is not allowed"})
    if not await raft.wait_for(lambda: raft.is_active, ACTIVE_WAIT_S):
        # Not relayed (no controller reachable): our image may be behind.
        return ctx.response({"throttle_time": 0, "error_code": errors.NotController.code,
                             "error_message": f"node {ctx.broker.node_id} is not the active "
                                              "controller", "topics": []})
    wanted = None if req.topics is None else [(t.name, t.partition_indexes)
                                              for t in req.topics]
    topics: dict[str, list[dict[str, Any]]] = {}
    for move in ongoing(controller.image, wanted):
        topics.setdefault(move.topic, []).append({
            "partition_index": move.partition, "replicas": move.replicas,
            "adding_replicas": move.adding, "removing_replicas": move.removing})
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
