"""DescribeTransactions (key 65), v0: the state of transactional ids this node coordinates
(kafka-transactions describe).

Each id gets its state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), timeout, start
time (-1 with no transaction open), producer id and epoch, and the partitions of its open
transaction; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the other transactional
APIs, TRANSACTIONAL_ID_NOT_FOUND for an unknown id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
without DESCRIBE on it.
v0: flexible.
"""
from __future__ import annotations

import datetime
from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


def _start_time(ms: int) -> datetime.datetime:
    """As a datetime, -1 (none started) included: build() would make a negative time null,
    which this non-nullable field cannot carry."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def _state(ctx: RequestContext, txn_id: str) -> dict[str, Any]:
    try:
        ctx.require("DESCRIBE", "TRANSACTIONAL_ID", txn_id)
        m = ctx.broker.txn_coordinator.describe(txn_id)
    except Exception as exc:
        return {"error_code": errors.code_of(exc, "describe transaction"),
                "transactional_id": txn_id, "transaction_state": "", "transaction_timeout": 0,
                "transaction_start_time": _start_time(-1), "producer_id": -1, "producer_epoch": -1,
                "topics": []}
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(p)
    return {"error_code": 0, "transactional_id": txn_id,
            "transaction_state": m.state.kafka_name, "transaction_timeout": m.timeout_ms,
            "transaction_start_time": _start_time(m.start_ms), "producer_id": m.producer_id,
            "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


@api(key=65, versions=(0, 0))
async def describe_transactions(ctx: RequestContext, req: Any) -> Any:
    return ctx.response({"throttle_time": 0, "transaction_states": [
        _state(ctx, txn_id) for txn_id in req.transactional_ids]})
