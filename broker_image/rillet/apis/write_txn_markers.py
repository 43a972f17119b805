"""WriteTxnMarkers (key 27), v1-2: the transaction coordinator ends a transaction in the
partitions this broker leads.

For each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) and each
partition named, a control batch is appended as leader and replicated to the in-sync
replicas (replication/txn_markers.py); each partition is answered on its own
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS, ...); a marker on a __consumer_offsets
partition settles the producer's transactional offset commits there. An inter-broker API:
the principal needs CLUSTER_ACTION on the cluster, else every partition is answered
CLUSTER_AUTHORIZATION_FAILED, as Kafka does. Sent by the transaction coordinator of another
node (txn/markers.py) and by admin tools (kafka-transactions abort).
Not v0 (removed in Kafka 4.0, KIP-896). v1: flexible. v2: transaction version (KIP-890),
accepted and not used: markers look the same to the log either way.
"""
from __future__ import annotations

import asyncio
from typing import Any

from ..internal_topics import OFFSETS_TOPIC
from ..protocol import errors
from ..replication.txn_markers import write_markers
from ..txn_marker import TxnMarker
from .registry import CLUSTER, RequestContext, api


def _answer(marker: Any, codes: dict[tuple[str, int], int]) -> dict[str, Any]:
    return {"producer_id": marker.producer_id, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p, "error_code": codes[(t.name, p)]}
            for p in t.partition_indexes]}
        for t in marker.topics]}


async def _write(ctx: RequestContext, marker: Any) -> dict[str, Any]:
    partitions = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
    txn_marker = TxnMarker(marker.producer_id, marker.producer_epoch,
                           bool(marker.transaction_result), marker.coordinator_epoch)
    codes = await write_markers(ctx.broker.replication, txn_marker, partitions)
    # Transactional offset commits on __consumer_offsets partitions are settled by it (only
    # those: markers on other topics need no group coordinator loaded, on_demand.py).
    offsets = [tp for tp in partitions if tp[0] == OFFSETS_TOPIC and codes.get(tp) == 0]
    if offsets:
        ctx.broker.coordinator.on_txn_markers(txn_marker, offsets)
    return _answer(marker, codes)


@api(key=27, versions=(1, 2))
async def write_txn_markers(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorized("CLUSTER_ACTION", "CLUSTER", CLUSTER):
        denied = errors.ClusterAuthorizationFailed.code
        return ctx.response({"markers": [
            _answer(m, {(t.name, int(p)): denied for t in m.topics for p in t.partition_indexes})
            for m in req.markers]})
    results = await asyncio.gather(*(_write(ctx, m) for m in req.markers))
    return ctx.response({"markers": list(results)})
