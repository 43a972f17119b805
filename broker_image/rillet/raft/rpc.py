"""Raft messages as Kafka's quorum RPCs on partition 0 of the quorum's topic.

Vote (52) v0, BeginQuorumEpoch (53) v0, EndQuorumEpoch (54) v0 and Fetch (1)
v12 with the replica id of the follower: the wire forms KRaft uses, so the
messages are Kafka's and only their plain-value translation lives here. The
topic (`__cluster_metadata` for the metadata quorum) is the caller's to name:
raft does not know what its log holds.
"""
from __future__ import annotations

from typing import Any

from . import messages as m

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH = 52, 53, 54, 1
VERSIONS = {VOTE: 0, BEGIN_QUORUM_EPOCH: 0, END_QUORUM_EPOCH: 0, FETCH: 12}
INCONSISTENT_CLUSTER_ID = 104


def _leader(value: int) -> int | None:
    return value if value >= 0 else None


def _wire_id(value: int | None) -> int:
    return -1 if value is None else value


def _topic(topic: str, partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"topic_name": topic, "partitions": [{"partition_index": 0, **partition}]}]


# -- requests ---------------------------------------------------------------------------


def encode_request(msg: m.Request, cluster_id: str, topic: str, max_wait_ms: int,
                   max_bytes: int) -> tuple[int, dict[str, Any]]:
    """(api key, body) of a request sent by this node about partition 0 of `topic`."""
    if isinstance(msg, m.VoteRequest):
        return VOTE, {"cluster_id": cluster_id, "topics": _topic(topic, {
            "replica_epoch": msg.epoch, "replica_id": msg.candidate_id,
            "last_offset_epoch": msg.last_epoch, "last_offset": msg.last_offset})}
    if isinstance(msg, m.BeginQuorumEpochRequest):
        return BEGIN_QUORUM_EPOCH, {"cluster_id": cluster_id, "topics": _topic(topic, {
            "leader_id": msg.leader_id, "leader_epoch": msg.epoch})}
    if isinstance(msg, m.EndQuorumEpochRequest):
        return END_QUORUM_EPOCH, {"cluster_id": cluster_id, "topics": _topic(topic, {
            "leader_id": msg.leader_id, "leader_epoch": msg.epoch,
            "preferred_successors": list(msg.preferred_successors)})}
    if isinstance(msg, m.FetchRequest):
        return FETCH, {
            "cluster_id": cluster_id, "replica_id": msg.replica_id, "max_wait": max_wait_ms,
            "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": msg.epoch,
                "fetch_offset": msg.fetch_offset, "last_fetched_epoch": msg.last_fetched_epoch,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}]}]}
    raise TypeError(f"not a quorum request: {msg!r}")


class InvalidQuorumRequest(ValueError):
    """A quorum RPC that does not name partition 0 of the quorum's topic alone:
    INVALID_REQUEST."""


def the_partition(body: Any, topic: str, topic_name: str, index: str) -> Any:
    """The one partition a quorum RPC is about; ``topic_name`` and ``index`` are the
    attributes holding its topic's name and partition's index in this API's schema. Raises
    InvalidQuorumRequest unless that is partition 0 of `topic` alone."""
    topics = body.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise InvalidQuorumRequest(f"{len(topics)} topic(s) in a quorum RPC; it names "
                                   f"{topic}-0 alone")
    name, partition = getattr(topics[0], topic_name), topics[0].partitions[0]
    if name != topic or getattr(partition, index) != 0:
        raise InvalidQuorumRequest(f"quorum RPC for {name!r} partition "
                                   f"{getattr(partition, index)}")
    return partition


def decode_request(api_key: int, body: Any, topic: str) -> tuple[str | None, int, m.Request]:
    """(cluster id, sender, message) of a request received by this node; raises
    InvalidQuorumRequest when it is not about partition 0 of `topic` alone."""
    cluster_id = getattr(body, "cluster_id", None)
    if api_key == FETCH:
        p = the_partition(body, topic, "topic", "partition")
        return cluster_id, body.replica_id, m.FetchRequest(
            p.current_leader_epoch, body.replica_id, p.fetch_offset, p.last_fetched_epoch)
    p = the_partition(body, topic, "topic_name", "partition_index")
    if api_key == VOTE:
        return cluster_id, p.replica_id, m.VoteRequest(
            p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset)
    if api_key == BEGIN_QUORUM_EPOCH:
        return cluster_id, p.leader_id, m.BeginQuorumEpochRequest(p.leader_epoch, p.leader_id)
    if api_key == END_QUORUM_EPOCH:
        return cluster_id, p.leader_id, m.EndQuorumEpochRequest(
            p.leader_epoch, p.leader_id, tuple(p.preferred_successors))
    raise ValueError(f"api key {api_key} is not a quorum RPC")


def is_quorum_fetch(body: Any, topic: str) -> bool:
    return any(t.topic == topic for t in body.topics)


# -- responses --------------------------------------------------------------------------


def encode_response(api_key: int, resp: m.Response | None, topic: str,
                    error: int = 0) -> dict[str, Any]:
    """Response body about partition 0 of `topic`; `resp` None with `error` set answers a
    refused request."""
    if resp is None:
        if api_key == FETCH:
            return {"throttle_time": 0, "error_code": error, "session_id": 0, "responses": []}
        return {"error_code": error, "topics": []}
    if isinstance(resp, m.FetchResponse):
        return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [{
            "topic": topic, "partitions": [{
                "partition_index": 0, "error_code": resp.error,
                "high_watermark": resp.high_watermark, "last_stable_offset": -1,
                "log_start_offset": resp.log_start_offset, "aborted_transactions": None,
                "diverging_epoch": {"epoch": resp.diverging_epoch,
                                    "end_offset": resp.diverging_end_offset},
                "current_leader": {"leader_id": _wire_id(resp.leader_id),
                                   "leader_epoch": resp.epoch},
                "snapshot_id": {"end_offset": resp.snapshot_end_offset,
                                "epoch": resp.snapshot_epoch},
                "preferred_read_replica": -1,
                "records": resp.records or b""}]}]}
    partition: dict[str, Any] = {"error_code": resp.error, "leader_id": _wire_id(resp.leader_id),
                                 "leader_epoch": resp.epoch}
    if isinstance(resp, m.VoteResponse):
        partition["vote_granted"] = resp.granted
    return {"error_code": 0, "topics": _topic(topic, partition)}


def decode_response(request: m.Request, body: Any) -> m.Response | int:
    """The core's message, or a request-level error code (the request failed)."""
    if body.error_code:
        return int(body.error_code)
    # A response about anything but one partition is a failed request, as one that never came.
    if isinstance(request, m.FetchRequest):
        if len(body.responses) != 1 or len(body.responses[0].partitions) != 1:
            return -1
        p = body.responses[0].partitions[0]
        return m.FetchResponse(
            p.current_leader.leader_epoch, _leader(p.current_leader.leader_id),
            request.fetch_offset, p.high_watermark, p.records or None,
            p.diverging_epoch.epoch, p.diverging_epoch.end_offset,
            p.snapshot_id.end_offset, p.snapshot_id.epoch, p.log_start_offset,
            int(p.error_code))
    if len(body.topics) != 1 or len(body.topics[0].partitions) != 1:
        return -1
    p = body.topics[0].partitions[0]
    error = int(p.error_code)
    if isinstance(request, m.VoteRequest):
        return m.VoteResponse(p.leader_epoch, bool(p.vote_granted), _leader(p.leader_id), error)
    if isinstance(request, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(p.leader_epoch, _leader(p.leader_id), error)
    return m.EndQuorumEpochResponse(p.leader_epoch, _leader(p.leader_id), error)
