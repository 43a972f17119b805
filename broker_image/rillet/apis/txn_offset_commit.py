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

from .offset_commit import commit_answer, commit_entries, unreadable
from .registry import RequestContext, api
from .txn_answers import txn_error_code


@api(key=28, versions=(0, 4))
async def txn_offset_commit(ctx: RequestContext, req: Any) -> Any:
    entries = commit_entries(req)
    await ctx.await_topics(t.name for t in req.topics)
    denied: set[str] = set()
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", req.transactional_id)
        ctx.require("READ", "GROUP", req.group_id)
        denied = unreadable(ctx, entries)
        codes = await ctx.broker.coordinator.txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            getattr(req, "member_id", ""), getattr(req, "group_instance_id", None),
            getattr(req, "generation_id", -1), [e for e in entries if e.topic not in denied])
    except Exception as exc:  # a group-level refusal applies to every partition
        code = txn_error_code(exc, "transactional offset commit", ctx.version, 3)
        codes, denied = {(e.topic, e.partition): code for e in entries}, set()
    return commit_answer(ctx, req, entries, codes, denied)
