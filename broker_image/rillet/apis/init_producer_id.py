"""InitProducerId (key 22), v0-4: producer ids for idempotent producers.

Ids come from blocks recorded in the metadata log, so they are never reused
across restarts. v3+: a producer that presents its id and epoch gets the
epoch bumped (KIP-360). Transactional ids are refused: rillet has no
transaction coordinator yet.
v2: flexible. v3: producer id/epoch in request. v4: same.
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol import errors
from .registry import RequestContext, api

log = logging.getLogger(__name__)
MAX_EPOCH = 32767


@api(key=22, versions=(0, 4), forward=True)
async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    if req.transactional_id is not None:
        return ctx.response({"throttle_time": 0,
                             "error_code": errors.TransactionalIdAuthorizationFailed.code,
                             "producer_id": -1, "producer_epoch": -1})
    authorizer = ctx.broker.authorizer
    if authorizer is not None and not authorizer.may_write_idempotently(ctx.session):
        return ctx.response({"throttle_time": 0,
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "producer_id": -1, "producer_epoch": -1})
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return ctx.response({"throttle_time": 0, "error_code": 0, "producer_id": pid,
                             "producer_epoch": epoch + 1})
    try:
        pid = await ctx.broker.controller.next_producer_id()
    except errors.KafkaError as exc:
        # No controller to hand out an id block (an election under way): clients retry this.
        log.info("InitProducerId: %s", exc)
        return ctx.response({"throttle_time": 0, "producer_id": -1, "producer_epoch": -1,
                             "error_code": errors.CoordinatorNotAvailable.code})
    return ctx.response({"throttle_time": 0, "error_code": 0, "producer_id": pid,
                         "producer_epoch": 0})
