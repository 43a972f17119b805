"""AlterPartitionReassignments (key 45), v0: start or cancel partition moves (KIP-455).

Decided by the active controller (other nodes relay the request). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unregistered
brokers; a cancel needing an unclean election), NO_REASSIGNMENT_IN_PROGRESS (a cancel
with nothing to cancel). A move to the current replicas is a successful no-op. The
answer comes once the move has started (committed), not when it completes: progress is
ListPartitionReassignments' job. Gaps: v1 (allow_replication_factor_change, KIP-860) is
not served; the replication factor may change, as v0 allows.
v0: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


@api(key=45, versions=(0, 0), forward=True)
async def alter_partition_reassignments(ctx: RequestContext, req: Any) -> Any:
    moves = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
             for t in req.topics for p in t.partitions]
    try:
        ctx.require("ALTER", "CLUSTER", CLUSTER)
        results = await ctx.broker.controller.alter_partition_reassignments(moves)
    except Exception as exc:
        # NOT_CONTROLLER and friends concern the whole request (the client retries it).
        return ctx.response({"throttle_time": 0,
                             "error_code": errors.code_of(exc, "alter reassignments"),
                             "error_message": errors.message_of(exc), "responses": []})
    outcome = iter(results)
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            error = next(outcome)
            parts.append({"partition_index": p.partition_index,
                          "error_code": 0 if error is None else error.code,
                          "error_message": None if error is None else error.message})
        responses.append({"name": t.name, "partitions": parts})
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "responses": responses})
