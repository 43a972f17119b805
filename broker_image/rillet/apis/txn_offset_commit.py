"""TxnOffsetCommit (key 28), v0-4: a transactional producer commits a consumer group's
offsets inside its transaction; sent to the group's coordinator.

The offsets are appended to __consumer_offsets as the producer's transactional batch and
stay invisible (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them)
until the transaction's marker settles them: COMMIT applies them, ABORT drops them
(coordinator/txn_offsets.py). Needs READ on the group and on each topic, WRITE on the
TRANSACTIONAL_ID. A member's generation and id are checked when given (v3+, KIP-447).
v1: same as v0. v2: committed leader epoch. v3: group metadata (generation, member id,
group instance id), flexible, PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH).
v4: TRANSACTION_ABORTABLE may be answered (never by rillet).
"""
from __future__ import annotations

from typing import Any

from ..coordinator.manager import CommitEntry
from ..protocol import errors
from .registry import RequestContext, api
from .txn_answers import txn_error_code


@api(key=28, versions=(0, 4))
async def txn_offset_commit(ctx: RequestContext, req: Any) -> Any:
    entries = [CommitEntry(t.name, p.partition_index, p.committed_offset,
                           getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in req.topics for p in t.partitions]
    await ctx.await_topics(t.name for t in req.topics)
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", req.transactional_id)
        ctx.require("READ", "GROUP", req.group_id)
        denied = {e.topic for e in entries if not ctx.authorized("READ", "TOPIC", e.topic)}
        codes = await ctx.broker.coordinator.txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            getattr(req, "member_id", ""), getattr(req, "group_instance_id", None),
            getattr(req, "generation_id", -1), [e for e in entries if e.topic not in denied])
        codes.update({(e.topic, e.partition): errors.TopicAuthorizationFailed.code
                      for e in entries if e.topic in denied})
    except Exception as exc:  # a group-level refusal applies to every partition
        code = txn_error_code(exc, "transactional offset commit", ctx.version, 3)
        codes = {(e.topic, e.partition): code for e in entries}
    return ctx.response({"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": codes[(t.name, p.partition_index)]} for p in t.partitions]}
        for t in req.topics]})
