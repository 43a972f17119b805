"""DescribeQuorum (key 55), v0-2: the metadata quorum as its leader sees it.

What `kafka-metadata-quorum describe --status / --replication` shows: leader,
epoch, high watermark, and every voter's log end offset and last fetch. Only
the leader knows its followers' progress, so other nodes relay the request
to it (forward). v1: last fetch and caught-up timestamps. v2: voter endpoints.
"""
from __future__ import annotations

import time
from typing import Any

from ..metadata.log import METADATA_TOPIC
from ..protocol import errors
from ..raft.node import now_ms
from .registry import RequestContext, api


def _replica(node_id: int, end_offset: int, last_fetch: int, caught_up: int) -> dict[str, Any]:
    return {"replica_id": node_id, "replica_directory_id": None, "log_end_offset": end_offset,
            "last_fetch_timestamp": last_fetch, "last_caught_up_timestamp": caught_up}


@api(key=55, versions=(0, 2), forward=True)
async def describe_quorum(ctx: RequestContext, req: Any) -> Any:
    raft = ctx.broker.raft
    if not raft.is_leader:
        return ctx.response({"error_code": 0, "error_message": None, "nodes": [], "topics": [{
            "topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "error_code": errors.NotLeaderOrFollower.code,
                "error_message": "this node does not lead the quorum", "leader_id": -1,
                "leader_epoch": -1, "high_watermark": -1, "current_voters": [],
                "observers": []}]}]})
    info = raft.quorum_info()
    # Progress is kept on the monotonic clock; the tool shows wall-clock times.
    to_wall = time.time() * 1000 - now_ms()
    voters = [_replica(ctx.broker.node_id, info.log_end_offset, int(time.time() * 1000),
                       int(time.time() * 1000))]
    def follower(node_id: int, p: Any) -> dict[str, Any]:
        seen = int(p.last_fetch_ms + to_wall) if p and p.last_fetch_ms >= 0 else -1
        caught = seen if p and p.end_offset >= info.high_watermark else -1
        return _replica(node_id, p.end_offset if p else -1, seen, caught)

    voters += [follower(n, info.progress.get(n)) for n in info.voters
               if n != ctx.broker.node_id]
    observers = [follower(n, p) for n, p in sorted(info.observers.items())]
    nodes = [{"node_id": v.node_id, "listeners": [{"name": "CONTROLLER", "host": v.host,
                                                   "port": v.port}]}
             for v in raft.voters.values()]
    return ctx.response({"error_code": 0, "error_message": None, "nodes": nodes, "topics": [{
        "topic_name": METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "error_code": 0, "error_message": None,
            "leader_id": info.leader_id, "leader_epoch": info.epoch,
            "high_watermark": info.high_watermark, "current_voters": voters,
            "observers": observers}]}]})
