"""AddOffsetsToTxn (key 25), v0-4: a transactional producer is about to commit a consumer
group's offsets inside its transaction (sendOffsetsToTransaction).

The group's __consumer_offsets partition (created on first use) joins the transaction, so
EndTxn writes a marker there too; the offsets follow with TxnOffsetCommit to the group's
coordinator. Needs WRITE on the TRANSACTIONAL_ID and READ on the group.
v1: same as v0. v2: PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH). v3: flexible.
v4: TRANSACTION_ABORTABLE may be answered (never by rillet).
"""
from __future__ import annotations

from typing import Any

from ..internal_topics import OFFSETS_TOPIC
from .registry import RequestContext, api
from .txn_answers import txn_error_code


@api(key=25, versions=(0, 4))
async def add_offsets_to_txn(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", req.transactional_id)
        ctx.require("READ", "GROUP", req.group_id)
        groups = ctx.broker.coordinator
        await groups.ensure_offsets_topic()
        await ctx.broker.txn_coordinator.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch,
            [(OFFSETS_TOPIC, groups.partition_for(req.group_id))])
        code = 0
    except Exception as exc:
        code = txn_error_code(exc, "add offsets to transaction", ctx.version, 2)
    return ctx.response({"throttle_time": 0, "error_code": code})
