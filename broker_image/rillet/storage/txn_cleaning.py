"""What compaction does with transactions' control batches: Kafka's rule for markers.

A COMMIT or ABORT marker stays while any data record of its transaction is still in the log:
a read_committed reader needs it to know the outcome (an abort also needs it to skip the
records). Once the cleaner has removed every data batch of the transaction (superseded
keys of a commit, all of an aborted one), the marker gets a delete horizon, now +
delete.retention.ms, written in the batch itself as Kafka does (KIP-534: attribute bit 6,
the horizon in the base timestamp; the CRC is recomputed, offsets and max timestamp stay);
a later pass after the horizon removes it. The horizon gives a reader that already read the
transaction's records the time to read its marker too, as for tombstones.

The aborted-transactions index follows: an abort whose records a pass did not see any more
(all removed by an earlier pass) loses its index entry, written before the cleaned segments
are swapped in. A read_committed reader given an entry whose marker is gone would skip
every later batch of that producer (it waits for the ABORT marker to stop skipping), so
the entry always goes no later than its marker.

Which data belongs to which marker is read in log order within one pass: a producer's
transactional batches up to its next marker are that marker's transaction (the pass covers
every closed segment below the last stable offset, from the log start, so it sees all of
them). Markers without a producer (other control batches) are kept as they are.

Thread safety: one TxnCleaning per pass, used by the cleaner's worker thread only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable

from ..records import ATTR_DELETE_HORIZON, BatchHeader, set_delete_horizon
from .segment import LogSegment


def delete_horizon(header: BatchHeader) -> int | None:
    """The delete horizon (ms) stamped on a batch, None when it has none."""
    return header.base_timestamp if header.attributes & ATTR_DELETE_HORIZON else None


@dataclass
class TxnCleaning:
    """One cleaning pass's view of transactions (Kafka's CleanedTransactionMetadata)."""
    now_ms: int
    delete_retention_ms: int
    # producer id -> whether a data batch of its current transaction is kept by this pass
    _kept: dict[int, bool] = field(default_factory=dict)
    _seen: set[int] = field(default_factory=set)   # ... whether any of its data is read
    # (producer id, marker offset) of markers whose transaction had no record left to read
    obsolete_aborts: set[tuple[int, int]] = field(default_factory=set)
    earliest_due_ms: int | None = None   # a kept marker's horizon: the next pass due then
    markers_removed: int = 0

    def on_data_batch(self, header: BatchHeader, kept_any: bool) -> None:
        """A transactional data batch was read; ``kept_any``: the pass keeps some of it."""
        if header.is_transactional and header.producer_id >= 0:
            self._seen.add(header.producer_id)
            self._kept[header.producer_id] = self._kept.get(header.producer_id, False) or kept_any

    def on_marker(self, header: BatchHeader, batch: bytes | memoryview
                  ) -> bytes | memoryview | None:
        """A control batch was read: the bytes to keep (the same, or stamped with a delete
        horizon), or None to remove it."""
        if header.producer_id < 0:
            return batch
        if header.producer_id not in self._seen:
            self.obsolete_aborts.add((header.producer_id, header.base_offset))
        self._seen.discard(header.producer_id)
        if self._kept.pop(header.producer_id, False):
            return batch   # its transaction still has data: readers need the outcome
        horizon = delete_horizon(header)
        if horizon is None:
            horizon = self.now_ms + self.delete_retention_ms
            batch = set_delete_horizon(batch, horizon)
        elif horizon <= self.now_ms:
            self.markers_removed += 1
            return None
        if self.earliest_due_ms is None or horizon < self.earliest_due_ms:
            self.earliest_due_ms = horizon
        return batch


def drop_obsolete_aborts(segments: Iterable[LogSegment], aborts: set[tuple[int, int]]
                         ) -> list[int]:
    """Remove these aborts' entries from the segments' aborted-transactions indexes (on the
    event loop: the segments are the log's); the descriptors to fsync, for the caller to
    sync and close off the loop before the cleaned segments are swapped in."""
    to_sync = []
    if not aborts:
        return to_sync
    for segment in segments:
        if segment.txn_index.drop(aborts):
            fd = segment.txn_index.dup_fd()
            if fd is not None:
                to_sync.append(fd)
    return to_sync


def fsync_and_close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
