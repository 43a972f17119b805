"""DescribeProducers (key 61), v0: the producer state of partitions this broker leads.

Per partition, each producer the log knows: its id and epoch, last sequence and timestamp,
the epoch of the transaction coordinator that last wrote it a marker, and where its open
transaction starts (-1: none). What `kafka-transactions describe-producers`, `find-hanging`
and `abort --start-offset` read (KIP-664). The principal needs READ on the topic, as in
Kafka. Errors per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
TOPIC_AUTHORIZATION_FAILED.
v0: flexible.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


def _partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "error_message": None,
                             "active_producers": []}
    try:
        ctx.require("READ", "TOPIC", topic)
        plog = ctx.broker.replication.leader_log(topic, index)
        entry["active_producers"] = [
            {"producer_id": p.producer_id, "producer_epoch": p.epoch,
             "last_sequence": p.last_seq, "last_timestamp": p.last_timestamp,
             "coordinator_epoch": p.coordinator_epoch,
             "current_txn_start_offset": p.current_txn_first_offset}
            for p in plog.producer_state.producers.values()]
    except Exception as exc:
        entry["error_code"] = errors.code_of(exc, "describe producers")
        entry["error_message"] = errors.message_of(exc)
    return entry


@api(key=61, versions=(0, 0))
async def describe_producers(ctx: RequestContext, req: Any) -> Any:
    await ctx.await_topics(t.name for t in req.topics)
    return ctx.response({"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_partition(ctx, t.name, int(p))
                                        for p in t.partition_indexes]}
        for t in req.topics]})
