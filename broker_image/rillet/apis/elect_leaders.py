"""ElectLeaders (key 43), v0-2: preferred or unclean leader elections, by the controller.

Forwarded to the active controller, which decides (controller/leader_balance.py) and
answers once the new leaders are committed. A null topic list means every partition;
then partitions that already have the right leader are left out of the answer.
v0: preferred only (no election type). v1: election type, top-level error code.
v2: flexible.
"""
from __future__ import annotations

from typing import Any

from ..controller.leader_balance import PREFERRED, ElectionOutcome
from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


def _wanted(req: Any) -> list[tuple[str, int]] | None:
    if req.topic_partitions is None:
        return None
    return [(t.topic, p) for t in req.topic_partitions for p in t.partitions]


def _results(outcomes: list[ElectionOutcome]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for o in outcomes:
        by_topic.setdefault(o.topic, []).append({
            "partition_id": o.partition,
            "error_code": 0 if o.error is None else o.error.code,
            "error_message": None if o.error is None else o.error.message})
    return [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]


@api(key=43, versions=(0, 2), forward=True)
async def elect_leaders(ctx: RequestContext, req: Any) -> Any:
    election_type = int(getattr(req, "election_type", PREFERRED))
    wanted = _wanted(req)
    try:
        ctx.require("ALTER", "CLUSTER", CLUSTER)
        outcomes = await ctx.broker.controller.elect_leaders(election_type, wanted)
    except errors.KafkaError as exc:
        # No decision was made (not the controller, no quorum): every partition asked for
        # carries the reason; a request for all partitions gets the top-level code.
        outcomes = [ElectionOutcome(t, p, exc) for t, p in wanted or ()]
        return ctx.response({"throttle_time": 0, "error_code": exc.code,
                             "replica_election_results": _results(outcomes)})
    return ctx.response({"throttle_time": 0, "error_code": 0,
                         "replica_election_results": _results(outcomes)})
