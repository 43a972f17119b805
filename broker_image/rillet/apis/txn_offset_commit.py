"""TxnOffsetCommit (key 28), v0-4: a transactional producer commits a consumer group's
offsets inside its transaction; sent to the group's coordinator.

The offsets are appended to __consumer_offsets as the producer's transactional batch and
stay invisible (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them)
until the transaction's marker settles them: COMMIT applies them, ABORT drops them
(coordinator/txn_offsets.py). Needs READ on the group and on each topic, WRITE on the
TRANSACTIONAL_ID. A member's generation and id are checked when given (v3+, KIP-447).
v1: same as v0. v2: committed leader epoch. v3: group metadata (generation, member id,
group instance id), flexible, PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH).
v4: TRANSACTION_ABORTABLE (KIP-890).
Like a Produce, the producer's first transactional commit on the group's __consumer_offsets
partition is verified with its transaction coordinator (txn/verification.py): a transaction
that did not add the group (AddOffsetsToTxn) is answered TRANSACTION_ABORTABLE (v4) or
INVALID_TXN_STATE (older), as Kafka 4.x does.
"""
from __future__ import annotations

from typing import Any

from ..internal_topics import OFFSETS_TOPIC
from ..protocol import errors
from ..txn.verdicts import check_still_verified, verification_error
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
        try:
            verified = await _verify(ctx, req)
            if verified is not None:   # no await from here to the append
                check_still_verified(*verified)
        except errors.NotEnoughReplicas as exc:
            # "Not verifiable now": the Java producer's TxnOffsetCommit handler treats
            # NOT_ENOUGH_REPLICAS as fatal and retries COORDINATOR_NOT_AVAILABLE after a
            # coordinator lookup, so it gets the latter, as Kafka converts it.
            raise errors.CoordinatorNotAvailable(str(exc)) from None
        codes = await ctx.broker.coordinator.txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            getattr(req, "member_id", ""), getattr(req, "group_instance_id", None),
            getattr(req, "generation_id", -1), [e for e in entries if e.topic not in denied])
    except Exception as exc:  # a group-level refusal applies to every partition
        code = txn_error_code(exc, "transactional offset commit", ctx.version, 3)
        codes, denied = {(e.topic, e.partition): code for e in entries}, set()
    return commit_answer(ctx, req, entries, codes, denied)


async def _verify(ctx: RequestContext, req: Any) -> tuple[Any, int, int, object, str] | None:
    """KIP-890: ask the transaction coordinator whether the group's offsets partition is in
    the transaction, unless the producer's transaction is already ongoing there; what
    ``check_still_verified`` needs, or None when nothing was asked."""
    verifier = ctx.broker.txn_coordinator.verifier
    if not verifier.enabled:
        return None
    p = ctx.broker.coordinator.check_coordinator(req.group_id)
    state = ctx.broker.replication.leader_log(OFFSETS_TOPIC, p).producer_state
    pid, epoch = req.producer_id, req.producer_epoch
    if not state.needs_verification(pid, epoch):
        return None
    guard = state.verification_guard(pid)
    codes = await verifier.verify(req.transactional_id, pid, epoch, [(OFFSETS_TOPIC, p)])
    refusal = verification_error(codes[(OFFSETS_TOPIC, p)], ctx.version >= 4)
    if refusal is not None:
        raise refusal
    return state, pid, epoch, guard, f"{OFFSETS_TOPIC}-{p}"
