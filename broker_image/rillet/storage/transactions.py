"""Where producer state meets the segments: markers read from batches, aborts indexed.

One path for all three ways a marker reaches a log (the leader's append, a follower's
replicated append, a replay while loading or after truncation): the producer state says
which transaction the marker ended, and an abort becomes an entry in the aborted-transactions
index of the segment holding the marker, with the LSO right after it. Replays add the same
entry again harmlessly (TransactionIndex.add skips it), which is what repairs an entry a
crash lost between the marker's write and the index's.

Thread safety: functions over the objects passed in, on the event loop thread (or the
loader's, before the log is shared).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from rillet.protocol.errors import CorruptMessage
from rillet.records import BatchHeader
from rillet.storage.producer_state import CompletedTxn, ProducerStateManager
from rillet.storage.segment import LogSegment
from rillet.storage.txn_index import AbortedTxn
from rillet.txn_marker import TxnMarker, decode_marker

log = logging.getLogger(__name__)


def marker_of(header: BatchHeader, batch: bytes | bytearray | memoryview) -> TxnMarker | None:
    """The transaction marker of a producer's control batch (None for any other batch)."""
    if not header.is_control or header.producer_id < 0:
        return None
    return decode_marker(header, batch)


def marker_in(data: bytearray | bytes, header: BatchHeader) -> TxnMarker | None:
    """The transaction marker of a control batch parsed from ``data`` (None for data
    batches: the hot path pays one attribute test)."""
    if not header.is_control:
        return None
    return marker_of(header, memoryview(data)[header.position:header.position + header.size])


def index_aborts(producer_state: ProducerStateManager, completed: Iterable[CompletedTxn],
                 segment_for: Callable[[int], LogSegment]) -> None:
    """Index each aborted transaction in the segment holding its marker."""
    for txn in completed:
        if txn.is_aborted:
            entry = AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                               producer_state.stable_offset_after(txn))
            segment_for(txn.last_offset).txn_index.add(entry)


def replay_batch(producer_state: ProducerStateManager, segment: LogSegment,
                 header: BatchHeader) -> None:
    """Replay one producer batch of a loaded ``segment`` (its marker read from the file)."""
    marker = None
    if header.is_control:
        try:
            marker = marker_of(header, segment.read_at(header.position, header.size))
        except CorruptMessage as exc:
            # CRC-valid but not a marker (never written by rillet): it ends nothing.
            log.warning("%s: %s", segment.log_path, exc)
    completed = producer_state.replay(header, marker)
    if completed is not None:
        index_aborts(producer_state, [completed], lambda _offset: segment)
