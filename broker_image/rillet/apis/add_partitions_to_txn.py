"""AddPartitionsToTxn (key 24), v0-3: a transactional producer names the partitions its
transaction writes to, before it produces to them.

The transaction coordinator of the id records them (Ongoing) so EndTxn knows where to write
the markers. Needs WRITE on the TRANSACTIONAL_ID and on each topic. A partition that does
not exist gets UNKNOWN_TOPIC_OR_PARTITION, one the principal may not write
TOPIC_AUTHORIZATION_FAILED, and the rest of the request OPERATION_NOT_ATTEMPTED, as Kafka
answers; a refusal of the id (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED,
INVALID_PRODUCER_ID_MAPPING, ...) applies to every partition.
Not served: v4-5, the batched broker-to-coordinator form of KIP-890 (verification).
v1: same as v0. v2: PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH). v3: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api
from .txn_answers import txn_error_code

TopicPartition = tuple[str, int]


def _codes(ctx: RequestContext, txn_id: str, partitions: list[TopicPartition]
           ) -> dict[TopicPartition, int] | None:
    """Per-partition refusals found before the coordinator is asked (None: none)."""
    denied = {t for t, _ in partitions if not ctx.authorized("WRITE", "TOPIC", t)}
    unknown = ctx.broker.txn_coordinator.unknown_partitions(
        tp for tp in partitions if tp[0] not in denied)
    if not denied and not unknown:
        return None
    return {tp: (errors.TopicAuthorizationFailed.code if tp[0] in denied
                 else errors.UnknownTopicOrPartition.code if tp in unknown
                 else errors.OperationNotAttempted.code) for tp in partitions}


@api(key=24, versions=(0, 3))
async def add_partitions_to_txn(ctx: RequestContext, req: Any) -> Any:
    txn_id = req.v3_and_below_transactional_id
    topics = req.v3_and_below_topics
    partitions = [(t.name, int(p)) for t in topics for p in t.partitions]
    await ctx.await_topics(t.name for t in topics)
    try:
        ctx.require("WRITE", "TRANSACTIONAL_ID", txn_id)
        codes = _codes(ctx, txn_id, partitions)
        if codes is None:
            await ctx.broker.txn_coordinator.add_partitions(
                txn_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                partitions)
            codes = {tp: 0 for tp in partitions}
    except Exception as exc:
        code = txn_error_code(exc, "add partitions to transaction", ctx.version, 2)
        codes = {tp: code for tp in partitions}
    return ctx.response({"throttle_time": 0, "results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": codes[(t.name, int(p))]}
            for p in t.partitions]}
        for t in topics]})
