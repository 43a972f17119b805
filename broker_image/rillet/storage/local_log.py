"""LocalLog: a partition's segments on disk (Kafka's LocalLog).

It owns the segment list and what touches only the segments: writing batches that already
carry their offsets (rolling on size, index room, offset span and time), reading whole
batches by offset, finding offsets by timestamp, cutting the tail or the whole log, deleting
the oldest segments, swapping in a cleaned copy, and fsyncing what was written together with
the recovery point that records it. What the bytes mean (offset assignment, producer state,
leader epochs, the high watermark, the log start offset) is PartitionLog's (log.py).

Durability: writes go to the page cache (they survive kill -9, not power loss); ``flush``
fsyncs in a worker thread that touches nothing but dup()ed descriptors and files it writes.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from rillet.protocol.errors import KafkaStorageError
from rillet.records import INT32_MAX, BatchHeader, decode_records
from rillet.storage import offset_files
from rillet.storage.leader_epoch import LeaderEpochCache
from rillet.storage.log_config import LogConfig
from rillet.storage.segment import LogSegment, new_segment
from rillet.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

# One batch to write: its header, the base offset it carries, its max timestamp.
WritePlan = list[tuple[BatchHeader, int, int]]


class LocalLog:
    """The segments of one partition, oldest first; never empty."""

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], float],
                 segments: list[LogSegment], recovery_point: int, dir_dirty: bool,
                 epochs: LeaderEpochCache) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        for segment in segments:
            self._append_segment(segment)
        # Its checkpoint file lives beside the segments; a flush makes both durable.
        self._epochs = epochs
        self.flushed_offset = recovery_point   # everything below is fsynced
        self._written_recovery_point = recovery_point
        self._last_flush_ms = self.now_ms()
        self._flush_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._dir_dirty = dir_dirty
        self._roll_flush_due = False
        self.rolled = False    # a segment was rolled since the owner last cleared this
        self.closed = False
        # A failed write or fsync: the log takes no more writes (its dir goes offline,
        # log_dir_failure.py), and the owner hears of it through on_io_error.
        self.failed = False
        self.on_io_error: Callable[[OSError], None] | None = None

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ------------------------------------------------------------ shape

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def first_base_offset(self) -> int:
        return self._segments[0].base_offset

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def _append_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    # ------------------------------------------------------------ write, roll

    def write(self, data: bytearray | bytes, plan: WritePlan, now_ms: int) -> None:
        """One os.write per segment touched (normally one)."""
        if self.failed:
            raise KafkaStorageError(f"{self.directory}: its log dir is offline")
        view = memoryview(data)
        segment = self._segments[-1]
        group: list[tuple[int, int, int]] = []
        group_start = plan[0][0].position
        end = group_start
        try:
            for header, base, max_ts in plan:
                last = base + header.last_offset_delta
                if self._should_roll(segment, header.size, last, max_ts, now_ms):
                    if group:
                        segment.append(view[group_start:end], group)
                        group = []
                    segment = self.roll(base, now_ms)
                    group_start = header.position
                group.append((last, max_ts, header.size))
                end = header.position + header.size
            segment.append(view[group_start:end], group)
        except OSError as exc:
            self._io_failed(exc)
            raise KafkaStorageError(f"write to {segment.log_path} failed: {exc}") from exc
        finally:
            view.release()

    def _should_roll(self, segment: LogSegment, size: int, last_offset: int, max_ts: int,
                     now_ms: int) -> bool:
        if segment.is_empty:
            return False
        if segment.size + size > self.config.segment_bytes or segment.index_full():
            return True
        if last_offset - segment.base_offset > INT32_MAX:
            return True  # relative offsets in the indexes are int32
        return _time_waited(segment, max_ts, now_ms) > self.config.segment_ms

    def roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """A new active segment at `base_offset` (the active one itself when it is empty
        and already starts there)."""
        active = self._segments[-1]
        if active.is_empty and active.base_offset == base_offset:
            return active
        active.seal()
        segment = new_segment(self.directory, self.config, base_offset, now_ms)
        self._append_segment(segment)
        self._dir_dirty = True
        self._roll_flush_due = True
        self.rolled = True
        return segment

    def active_segment_expired(self) -> bool:
        """The active segment holds data and segment.ms passed since its first batch."""
        active = self._segments[-1]
        now = self.now_ms()
        return not active.is_empty and _time_waited(active, now, now) > self.config.segment_ms

    # ------------------------------------------------------------ flush

    def flush_due(self, now_ms: int) -> bool:
        """flush.ms elapsed since the last flush and there is something to flush."""
        return (self.flushed_offset < self.end_offset
                and now_ms - self._last_flush_ms >= self.config.flush_ms)

    def flush_due_at(self) -> float:
        """When `flush_due` turns true, as things stand: math.inf with nothing to flush (an
        append, a flush or a new flush.ms changes it)."""
        if self.flushed_offset >= self.end_offset:
            return math.inf
        return self._last_flush_ms + self.config.flush_ms

    def flush_pending(self) -> bool:
        """Whether `maybe_flush` has anything to do (cheap; lets callers skip the await)."""
        return (self._roll_flush_due
                or self.end_offset - self.flushed_offset >= self.config.flush_messages)

    async def maybe_flush(self) -> None:
        """After a write: fsync now if flush.messages is reached; flush rolled segments in
        the background."""
        if self.end_offset - self.flushed_offset >= self.config.flush_messages:
            await self.flush()
        elif self._roll_flush_due:
            self._roll_flush_due = False
            task = asyncio.get_running_loop().create_task(self._background_flush())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _background_flush(self) -> None:
        try:
            await self.flush()
        except Exception:  # logged, retried by the next flush; nobody awaits this task
            log.exception("%s: background flush failed", self.directory)

    async def flush(self) -> None:
        """fsync everything written so far, in a worker thread. Concurrent callers share one
        fsync."""
        target = self.end_offset
        # min(): a truncation while an fsync is in flight can leave the log shorter than
        # target for good; waiting for target then would start empty fsyncs forever.
        while self.flushed_offset < min(target, self.end_offset) and not self.closed:
            task = self._flush_task
            if task is None:
                task = self._flush_task = asyncio.get_running_loop().create_task(
                    self._flush_once())
            await asyncio.shield(task)

    async def _flush_once(self) -> None:
        try:
            leo = self.end_offset
            fds: list[int] = []
            taken: list[tuple[LogSegment, tuple[bool, bool, bool]]] = []
            for segment in self._segments:
                segment_fds, flags = segment.take_dirty()
                if segment_fds:
                    fds += segment_fds
                    taken.append((segment, flags))
            epochs = self._epochs.path if self._epochs.dirty else None
            self._epochs.dirty = False
            sync_dir = self._dir_dirty or epochs is not None
            self._dir_dirty = False
            # Writing the recovery point only matters when it crosses into another segment.
            crossed = (bisect_right(self._bases, leo)
                       != bisect_right(self._bases, self._written_recovery_point))
            rp = leo if crossed else None
            try:
                await asyncio.to_thread(offset_files.sync_files, self.directory, fds, sync_dir,
                                        epochs, rp)
            except OSError as exc:
                # Everything handed to this fsync still needs one: the next flush retries it.
                for segment, flags in taken:
                    segment.restore_dirty(flags)
                self._epochs.dirty = self._epochs.dirty or epochs is not None
                self._dir_dirty = True
                self._io_failed(exc)
                raise KafkaStorageError(f"flush of {self.directory} failed: {exc}") from exc
            if rp is not None:
                self._written_recovery_point = rp
            self.flushed_offset = max(self.flushed_offset, min(leo, self.end_offset))
            self._last_flush_ms = self.now_ms()
        finally:
            self._flush_task = None

    # ------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int, max_offset: int | None,
             min_one_batch: bool) -> bytes:
        """Whole batches from the one holding `offset` (the caller checked the bounds)."""
        for segment in self._segments[self._segment_index(offset):]:
            if offset >= segment.next_offset:
                continue
            return segment.read(offset, max_bytes, max_offset, min_one_batch)
        return b""

    def read_slices(self, offset: int, max_bytes: int, max_offset: int | None,
                    min_one_batch: bool) -> list[tuple[int, int, int]]:
        """What `read` would return, as (fd, position, length); see PartitionLog."""
        for segment in self._segments[self._segment_index(offset):]:
            if offset >= segment.next_offset:
                continue
            position, length = segment.byte_range(offset, max_bytes, max_offset, min_one_batch)
            return [(segment.fileno(), position, length)] if length else []
        return []

    def segment_holding(self, offset: int) -> LogSegment:
        """The segment whose offsets include `offset` (the active one past the end)."""
        return self._segments[self._segment_index(offset)]

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions holding offsets in [fetch_offset, upper_offset).

        An abort is indexed in the segment of its marker, which may come after the fetched
        range, so later segments are searched too, until an entry whose LSO at abort is at
        or past `upper_offset` shows that every transaction open below it had ended (as
        Kafka's collectAbortedTxns stops)."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_index(fetch_offset):]:
            if not segment.txn_index.entries:
                continue
            entries, complete = segment.txn_index.collect(fetch_offset, upper_offset)
            found += entries
            if complete:
                break
        return found

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`."""
        for segment in self._segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            start = segment.offset_index.lookup(segment.time_index.lookup_before(timestamp_ms))
            for header in segment.scan(start):
                if header.max_timestamp < timestamp_ms:
                    continue
                _, records = decode_records(segment.read_at(header.position, header.size))
                for record in records:
                    if record.timestamp >= timestamp_ms:
                        return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None
                                               or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        header = best.find_batch(best.offset_of_max_timestamp)
        if header is None:
            return None
        _, records = decode_records(best.read_at(header.position, header.size))
        for record in records:
            if record.timestamp == best.max_timestamp:
                return record.offset, record.timestamp
        return header.last_offset, best.max_timestamp

    # ------------------------------------------------------------ truncation, deletion

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= `offset`, keeping the first segment."""
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._bases.pop()
            self._segments.pop().delete()
        self._segments[-1].truncate_to(offset)
        self._after_truncation()

    def truncate_fully(self, start: int) -> None:
        """Drop every segment; the log continues, empty, at `start`."""
        for segment in self._segments:
            segment.delete()
        self._segments, self._bases = [], []
        self._append_segment(new_segment(self.directory, self.config, start, self.now_ms()))
        offset_files.write_recovery_point(self.directory, start, sync=False)
        self._written_recovery_point = start
        self._after_truncation()

    def _after_truncation(self) -> None:
        leo = self.end_offset
        self.flushed_offset = min(self.flushed_offset, leo)
        if self._written_recovery_point > leo:
            # New appends will reuse these offsets unflushed: the file must not vouch for them.
            offset_files.write_recovery_point(self.directory, leo, sync=False)
            self._written_recovery_point = leo
        self._dir_dirty = True

    def restart_at(self, offset: int) -> None:
        """After `truncate_fully(offset)`: nothing below `offset` needs a flush."""
        self.flushed_offset = self._written_recovery_point = offset

    def deletable_prefix(self, predicate: Callable[[LogSegment, int], bool],
                         high_watermark: int) -> int:
        """How many of the oldest segments `predicate(segment, upper)` holds for, all
        their data below `high_watermark` (upper: the next segment's base offset)."""
        count = 0
        for i, segment in enumerate(self._segments):
            upper = self._bases[i + 1] if i + 1 < len(self._segments) else self.end_offset
            if segment.is_empty or upper > high_watermark or not predicate(segment, upper):
                break
            count += 1
        return count

    def delete_oldest(self, count: int) -> None:
        """Delete the `count` oldest segments (at least one stays: roll first if all go)."""
        for segment in self._segments[:count]:
            segment.delete()
        del self._segments[:count]
        del self._bases[:count]
        self._dir_dirty = True

    def swap_cleaned_segment(self, base_offset: int, expected_size: int,
                             files: tuple[Path, Path, Path]) -> LogSegment | None:
        """Put the log cleaner's compacted copy of a closed segment in its place.

        ``files``: the copy's data, offset index and time index files (``*.cleaned``,
        fsynced by the cleaner). Returns the replaced segment, whose descriptors the
        caller closes a little later (an in-flight read may still use them), or None
        when the segment is gone, active or changed size meanwhile (the copy is then
        deleted). An empty copy removes the segment instead (never the first one: the
        log start offset stays). Crash-safe order: old indexes unlinked (rebuilt when
        missing), data file renamed over the old one (atomic), new indexes renamed in;
        recovery deletes leftover ``.cleaned`` files.
        """
        index = next((i for i, s in enumerate(self._segments) if s.base_offset == base_offset),
                     None)
        if (index is None or index == len(self._segments) - 1
                or self._segments[index].size != expected_size):
            for path in files:
                path.unlink(missing_ok=True)
            return None
        old = self._segments[index]
        data, offset_index, time_index = files
        old.offset_index.path.unlink(missing_ok=True)
        old.time_index.path.unlink(missing_ok=True)
        if index > 0 and os.stat(data).st_size == 0:
            for path in (*files, old.log_path, old.txn_index.path):
                path.unlink(missing_ok=True)
            del self._segments[index]
            del self._bases[index]
            return old
        os.replace(data, old.log_path)
        os.replace(offset_index, old.offset_index.path)
        os.replace(time_index, old.time_index.path)
        fresh = new_segment(self.directory, self.config, base_offset, self.now_ms())
        if not fresh.load():
            fresh.recover()
        self._segments[index] = fresh
        return old

    def _io_failed(self, exc: OSError) -> None:
        # A failed fsync may have dropped dirty pages the kernel will not write again
        # (Linux marks them clean): retrying it could report success over lost data.
        self.failed = True
        if self.on_io_error is not None:
            self.on_io_error(exc)

    def close(self) -> None:
        """Stop background flushes and close every segment's files."""
        self.closed = True
        for task in list(self._background):
            task.cancel()
        for segment in self._segments:
            segment.close()


def _time_waited(segment: LogSegment, timestamp: int, now_ms: int) -> int:
    """Kafka's rule: measured from the first batch's timestamp, else from segment creation."""
    if segment.first_batch_timestamp >= 0:
        return timestamp - segment.first_batch_timestamp
    return now_ms - segment.created_ms
