"""FetchSnapshot (key 59), v0: a follower far behind pulls the leader's metadata snapshot.

Served on the controller listener only. The snapshot file is read by position, in
chunks of at most max_bytes, as KRaft does; the follower installs it whole once it
has every byte (see Broker.load_snapshot). v1 adds directory ids (KIP-853).
"""
from __future__ import annotations

import asyncio
from typing import Any

from ..metadata.log import METADATA_TOPIC
from ..metadata.snapshot import SnapshotError
from ..protocol import errors
from ..raft import rpc
from .registry import RequestContext, api

SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
MAX_CHUNK = 1 << 20


def _partition(code: int, snapshot: Any, leader: int, epoch: int, size: int = -1,
               position: int = -1, data: bytes = b"") -> dict[str, Any]:
    return {"index": 0, "error_code": code,
            "snapshot_id": {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
            "current_leader": {"leader_id": leader, "leader_epoch": epoch},
            "size": size, "position": position, "unaligned_records": data}


@api(key=59, versions=(0, 0), scope="controller")
async def fetch_snapshot(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    raft = broker.raft
    if req.cluster_id is not None and req.cluster_id != broker.cluster_id:
        return ctx.response({"throttle_time": 0, "error_code": rpc.INCONSISTENT_CLUSTER_ID,
                             "topics": []})
    try:
        p = rpc.the_partition(req, METADATA_TOPIC, "name", "partition")
    except rpc.InvalidQuorumRequest:
        return ctx.response({"throttle_time": 0, "error_code": errors.InvalidRequest.code,
                             "topics": []})
    snap = p.snapshot_id
    leader = -1 if raft.leader_id is None else raft.leader_id
    if not raft.is_leader:
        part = _partition(errors.NotLeaderOrFollower.code, snap, leader, raft.epoch)
    else:
        store = broker.snapshots
        try:
            # File reads (up to a MiB) in a worker thread, never on the event loop.
            size = await asyncio.to_thread(store.size, snap.end_offset, snap.epoch)
            if not 0 <= p.position <= size:
                part = _partition(POSITION_OUT_OF_RANGE, snap, leader, raft.epoch, size)
            else:
                data = await asyncio.to_thread(store.read_chunk, snap.end_offset, snap.epoch,
                                               p.position, min(req.max_bytes, MAX_CHUNK))
                part = _partition(0, snap, leader, raft.epoch, size, p.position, data)
        except (SnapshotError, OSError):
            part = _partition(SNAPSHOT_NOT_FOUND, snap, leader, raft.epoch)
    return ctx.response({"throttle_time": 0, "error_code": 0,
                         "topics": [{"name": METADATA_TOPIC, "partitions": [part]}]})
