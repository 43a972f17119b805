"""AddPartitionsToTxn (key 24), v0-5: a transactional producer names the partitions its
transaction writes to, before it produces to them (v0-3); brokers ask the coordinator whether
partitions are in a transaction (v4-5, KIP-890 part 1).

The transaction coordinator of the id records them (Ongoing) so EndTxn knows where to write
the markers. Needs WRITE on the TRANSACTIONAL_ID and on each topic. A partition that does
not exist gets UNKNOWN_TOPIC_OR_PARTITION, one the principal may not write
TOPIC_AUTHORIZATION_FAILED, and the rest of the request OPERATION_NOT_ATTEMPTED, as Kafka
answers; a refusal of the id (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED,
INVALID_PRODUCER_ID_MAPPING, ...) applies to every partition.
v4-5 are the batched broker-to-broker form: a `Transactions` array, each transaction
answered on its own, per partition; VerifyOnly=true changes nothing and answers NONE for a
partition in the producer's ongoing transaction, TRANSACTION_ABORTABLE (v5; INVALID_TXN_STATE
at v4) for one that is not, as Kafka 4.x's coordinator does; VerifyOnly=false adds them as
v0-3 do. It needs CLUSTER_ACTION (a top-level CLUSTER_AUTHORIZATION_FAILED otherwise), as
Kafka does from v4 on: clients keep v0-3.
v1: same as v0. v2: PRODUCER_FENCED (older: INVALID_PRODUCER_EPOCH). v3: flexible.
v4: batched, VerifyOnly, top-level error code. v5: TRANSACTION_ABORTABLE.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import CLUSTER, RequestContext, api
from .txn_answers import txn_error_code

TopicPartition = tuple[str, int]


def _codes(ctx: RequestContext, txn_id: str, partitions: list[TopicPartition]
           ) -> dict[TopicPartition, int] | None:
    """Per-partition refusals found before the coordinator is asked (None: none). WRITE on
    the topics is a client's check (v0-3): v4+ comes from a broker, already allowed by
    CLUSTER_ACTION, whose principal need not hold WRITE on every topic (as in Kafka)."""
    denied = set() if ctx.version >= 4 else {
        t for t, _ in partitions if not ctx.authorized("WRITE", "TOPIC", t)}
    unknown = ctx.broker.txn_coordinator.unknown_partitions(
        tp for tp in partitions if tp[0] not in denied)
    if not denied and not unknown:
        return None
    return {tp: (errors.TopicAuthorizationFailed.code if tp[0] in denied
                 else errors.UnknownTopicOrPartition.code if tp in unknown
                 else errors.OperationNotAttempted.code) for tp in partitions}


@api(key=24, versions=(0, 5))
async def add_partitions_to_txn(ctx: RequestContext, req: Any) -> Any:
    if ctx.version >= 4:
        return await _batched(ctx, req)
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


async def _batched(ctx: RequestContext, req: Any) -> Any:
    """v4-5: each transaction of the batch verified or added, answered on its own."""
    if not ctx.authorized("CLUSTER_ACTION", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0,
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "results_by_transaction": []})
    await ctx.await_topics(t.name for txn in req.transactions for t in txn.topics)
    results = [await _transaction(ctx, txn) for txn in req.transactions]
    return ctx.response({"throttle_time": 0, "error_code": 0,
                         "results_by_transaction": results})


async def _transaction(ctx: RequestContext, txn: Any) -> dict[str, Any]:
    partitions = [(t.name, int(p)) for t in txn.topics for p in t.partitions]
    coordinator = ctx.broker.txn_coordinator
    try:
        codes = _codes(ctx, txn.transactional_id, partitions)
        if codes is None and txn.verify_only:
            missing = coordinator.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
            not_in = (errors.TransactionAbortable.code if ctx.version >= 5
                      else errors.InvalidTxnState.code)
            codes = {tp: not_in if tp in missing else 0 for tp in partitions}
        elif codes is None:
            await coordinator.add_partitions(txn.transactional_id, txn.producer_id,
                                             txn.producer_epoch, partitions)
            codes = {tp: 0 for tp in partitions}
    except Exception as exc:
        code = txn_error_code(exc, "add partitions to transaction", ctx.version, 2)
        codes = {tp: code for tp in partitions}
    return {"transactional_id": txn.transactional_id, "topic_results": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": codes[(t.name, int(p))]}
            for p in t.partitions]}
        for t in txn.topics]}
