"""OffsetCommit (key 8), v2-8: committed offsets go to __consumer_offsets.

A member commits with its generation (stale -> ILLEGAL_GENERATION, unknown
-> UNKNOWN_MEMBER_ID, fenced static member -> FENCED_INSTANCE_ID); an Empty
group also accepts generation -1 with no member (admin tools, manual
assignment). Unknown topics get UNKNOWN_TOPIC_OR_PARTITION, metadata over
offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE. The response is sent
once the records are appended (and fsynced when the flush policy says so).
v2-4: retention time (-1 = broker default). v3: throttle time.
v6: committed leader epoch. v7: group.instance.id. v8: flexible.
"""
from __future__ import annotations

from typing import Any

from ..coordinator.group_types import CommitEntry
from ..protocol import errors
from .registry import RequestContext, api


def commit_entries(req: Any) -> list[CommitEntry]:
    """The offsets an OffsetCommit or TxnOffsetCommit request names."""
    return [CommitEntry(t.name, p.partition_index, p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
            for t in req.topics for p in t.partitions]


def unreadable(ctx: RequestContext, entries: list[CommitEntry]) -> set[str]:
    """The topics of ``entries`` the principal may not READ (their partitions are answered
    TOPIC_AUTHORIZATION_FAILED, the others are committed)."""
    return {e.topic for e in entries if not ctx.authorized("READ", "TOPIC", e.topic)}


def commit_answer(ctx: RequestContext, req: Any, entries: list[CommitEntry],
                  codes: dict[tuple[str, int], int], denied: set[str]) -> Any:
    codes.update({(e.topic, e.partition): errors.TopicAuthorizationFailed.code
                  for e in entries if e.topic in denied})
    topics = [{"name": t.name,
               "partitions": [{"partition_index": p.partition_index,
                               "error_code": codes[(t.name, p.partition_index)]}
                              for p in t.partitions]}
              for t in req.topics]
    return ctx.response({"throttle_time": 0, "topics": topics})


@api(key=8, versions=(2, 8))
async def offset_commit(ctx: RequestContext, req: Any) -> Any:
    retention = getattr(req, "retention_time", None)
    retention_ms = int(retention.total_seconds() * 1000) if retention is not None else -1
    entries = commit_entries(req)
    await ctx.await_topics(t.name for t in req.topics)
    denied: set[str] = set()
    try:
        ctx.require("READ", "GROUP", req.group_id)
        denied = unreadable(ctx, entries)
        codes = await ctx.broker.coordinator.commit_offsets(
            req.group_id, req.member_id, getattr(req, "group_instance_id", None),
            req.generation_id_or_member_epoch, retention_ms,
            [e for e in entries if e.topic not in denied])
    except Exception as exc:  # a group-level refusal applies to every partition
        code = errors.code_of(exc, "offset commit")
        codes, denied = {(e.topic, e.partition): code for e in entries}, set()
    return commit_answer(ctx, req, entries, codes, denied)
