"""InitProducerId (key 22), v0-4: producer ids for idempotent and transactional producers.

Without a transactional id: ids come from blocks recorded in the metadata log, so they are
never reused across restarts; the request is relayed to the active controller, which owns
the blocks. v3+: a producer that presents its id and epoch gets the epoch bumped (KIP-360).
With a transactional id: answered here by the transaction coordinator (txn/coordinator.py)
when this node coordinates the id (else NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS):
a new id, or the epoch bumped, fencing older producers of the id; a transaction left open
is aborted first (CONCURRENT_TRANSACTIONS, the client retries). Needs WRITE on the
TRANSACTIONAL_ID.
v2: flexible. v3: producer id/epoch in request. v4: PRODUCER_FENCED (older versions get
INVALID_PRODUCER_EPOCH).
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol import errors
from .registry import RequestContext, api
from .txn_answers import millis, txn_error_code

log = logging.getLogger(__name__)
MAX_EPOCH = 32767


def _idempotent(req: Any) -> bool:
    """Only the idempotent form goes to the active controller."""
    return req.transactional_id is None


def _answer(ctx: RequestContext, code: int, pid: int = -1, epoch: int = -1) -> Any:
    return ctx.response({"throttle_time": 0, "error_code": code, "producer_id": pid,
                         "producer_epoch": epoch})


async def _transactional(ctx: RequestContext, req: Any) -> Any:
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", req.transactional_id)
        pid, epoch = await ctx.broker.txn_coordinator.init_producer_id(
            req.transactional_id, millis(req.transaction_timeout),
            getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1))
    except Exception as exc:
        return _answer(ctx, txn_error_code(exc, "init producer id", ctx.version, 4))
    return _answer(ctx, 0, pid, epoch)


@api(key=22, versions=(0, 4), forward=True, forward_when=_idempotent)
async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    if req.transactional_id is not None:
        return await _transactional(ctx, req)
    authorizer = ctx.broker.authorizer
    if authorizer is not None and not authorizer.may_write_idempotently(ctx.session):
        return _answer(ctx, errors.ClusterAuthorizationFailed.code)
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return _answer(ctx, 0, pid, epoch + 1)
    try:
        pid = await ctx.broker.controller.next_producer_id()
    except errors.KafkaError as exc:
        # No controller to hand out an id block (an election under way). As Kafka 3.5+
        # (KAFKA-14417/14694): COORDINATOR_LOAD_IN_PROGRESS, which every client retries as
        # is. COORDINATOR_NOT_AVAILABLE sends kafka-python 3.0.12's idempotent producer to
        # FindCoordinator with a null key, a malformed request that closes the connection,
        # again and again: it never gets an id and its flush() never ends.
        log.info("InitProducerId: %s", exc)
        return _answer(ctx, errors.CoordinatorLoadInProgress.code)
    return _answer(ctx, 0, pid, 0)
