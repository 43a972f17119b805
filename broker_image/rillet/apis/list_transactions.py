"""ListTransactions (key 66), v0-1: the transactional ids this node coordinates
(kafka-transactions list asks every broker).

Filters: states by Kafka's names (names it does not know come back in
unknown_state_filters), producer ids, and (v1) a minimum time in ms since the
transaction started (-1: none; as in Kafka, an id with none started passes it). Ids the principal may not DESCRIBE are left out.
v0: flexible. v1: duration filter.
Not served: v2 (a transactional id pattern filter).
"""
from __future__ import annotations

from typing import Any

from ..txn.metadata import STATE_BY_NAME
from .registry import RequestContext, api


@api(key=66, versions=(0, 1))
async def list_transactions(ctx: RequestContext, req: Any) -> Any:
    states = {STATE_BY_NAME[s] for s in req.state_filters if s in STATE_BY_NAME}
    pids = set(req.producer_id_filters)
    min_duration = getattr(req, "duration_filter", -1)
    coordinator = ctx.broker.txn_coordinator
    now = coordinator.now()
    listed = [m for m in coordinator.transactions()
              if (not states or m.state in states) and (not pids or m.producer_id in pids)
              and (min_duration < 0 or now - m.start_ms >= min_duration)
              and ctx.authorized("DESCRIBE", "TRANSACTIONAL_ID", m.transactional_id,
                                 quiet=True)]
    return ctx.response({"throttle_time": 0, "error_code": 0,
                         "unknown_state_filters": [s for s in req.state_filters
                                                   if s not in STATE_BY_NAME],
                         "transaction_states": [
                             {"transactional_id": m.transactional_id,
                              "producer_id": m.producer_id,
                              "transaction_state": m.state.kafka_name} for m in listed]})
