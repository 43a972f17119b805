"""EndTxn (key 26), v0-4: a transactional producer commits or aborts its transaction.

The coordinator persists PrepareCommit/PrepareAbort and answers; the markers are then
written to every partition of the transaction and CompleteCommit/CompleteAbort persisted
(txn/coordinator.py). A retry of an end already complete is answered again; one still in
progress gets CONCURRENT_TRANSACTIONS. Needs WRITE on the TRANSACTIONAL_ID.
Not served: v5 (transaction.version 2, KIP-890 part 2: the epoch bumped on every end).
v1: same as v0. v2: PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH). v3: flexible.
v4: TRANSACTION_ABORTABLE may be answered (never by rillet).
"""
from __future__ import annotations

from typing import Any

from .registry import RequestContext, api
from .txn_answers import txn_error_code


@api(key=26, versions=(0, 4))
async def end_txn(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", req.transactional_id)
        await ctx.broker.txn_coordinator.end_txn(req.transactional_id, req.producer_id,
                                                 req.producer_epoch, bool(req.committed))
        code = 0
    except Exception as exc:
        code = txn_error_code(exc, "end transaction", ctx.version, 2)
    return ctx.response({"throttle_time": 0, "error_code": code})
