"""Writing transaction markers on the partitions this node leads.

The one interface for "end producer P's transaction (epoch E) with COMMIT or ABORT in these
partitions": the WriteTxnMarkers API calls it for the partitions a request names, and the
transaction coordinator (a later step) will call it for partitions led here and send
WriteTxnMarkers for the others. Each partition gets a control batch appended as leader
(the log's producer state checks the producer and coordinator epochs, ends the open
transaction and indexes an abort), then the call waits, as Kafka does with acks=all, until
every in-sync replica has the marker: only then is the outcome known on any future leader.
The answer is an error code per partition (0: written and replicated).

Thread safety: event loop only; the appends are synchronous, the waits are not.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from ..protocol import errors
from ..records import parse_batches
from ..storage.log import PartitionLog
from ..txn_marker import TxnMarker, encode_marker
from .manager import ReplicaManager, TopicPartition

# How long a marker waits for the in-sync replicas (Kafka uses the request timeout).
REPLICATION_TIMEOUT_S = 30.0


async def write_markers(replication: ReplicaManager, marker: TxnMarker,
                        partitions: Iterable[TopicPartition],
                        timeout_s: float = REPLICATION_TIMEOUT_S) -> dict[TopicPartition, int]:
    """Append ``marker`` to each partition this node leads and wait for its replication;
    returns the error code of each partition."""
    codes: dict[TopicPartition, int] = {}
    waits = []
    for tp in partitions:
        try:
            end, plog = _append(replication, marker, tp)
            waits.append(_replicated(replication, tp, plog, end, timeout_s, codes))
        except Exception as exc:  # one partition's failure never stops the others
            codes[tp] = errors.code_of(exc, "write transaction marker")
    if waits:
        await asyncio.gather(*waits)
    return codes


def _append(replication: ReplicaManager, marker: TxnMarker,
            tp: TopicPartition) -> tuple[int, PartitionLog]:
    data = bytearray(encode_marker(marker, int(time.time() * 1000)))
    _, plog = replication.append_as_leader(tp[0], tp[1], data, parse_batches(data), acks=-1)
    return plog.log_end_offset, plog


async def _replicated(replication: ReplicaManager, tp: TopicPartition, plog: PartitionLog,
                      end_offset: int, timeout_s: float, codes: dict[TopicPartition, int]) -> None:
    try:
        if plog.flush_pending():   # flush.messages, as for a produce
            await plog.maybe_flush()
        await replication.wait_for_high_watermark(tp, end_offset, timeout_s)
        replication.check_min_insync(tp[0], tp[1], after_append=True)
        codes[tp] = 0
    except Exception as exc:
        codes[tp] = errors.code_of(exc, "write transaction marker")
