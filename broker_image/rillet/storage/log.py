"""PartitionLog: the segmented log of one partition (Kafka's LocalLog + UnifiedLog in one).

Directory ``<log.dir>/<topic>-<partition>`` holds:
- ``<base>.log`` / ``.index`` / ``.timeindex`` per segment (20-digit zero-padded base offset);
- ``<offset>.snapshot`` producer-state snapshots (producer_state.py);
- ``leader-epoch-checkpoint`` (leader_epoch.py);
- ``recovery-point``, ``high-watermark``, ``log-start-offset`` (offset_files.py).
Opening it after a clean or an unclean stop is log_loader.py's job; the settings are
log_config.py's.

Durability: ``append`` only writes to the page cache (survives kill -9, not
power loss). ``flush`` fsyncs in a worker thread. With flush.messages=1 the
caller awaits ``maybe_flush`` before acknowledging, so every ack is on disk.
With the default policy (Kafka's: never force) an acks=1 ack means "in the OS
page cache of the leader": it survives a broker crash, not a machine crash;
rolled segments are fsynced in the background as Kafka does.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rillet.protocol.errors import (
    CorruptMessage,
    InvalidRecord,
    KafkaStorageError,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from rillet.records import (INT32_MAX, BatchHeader, decode_records, read_header, set_log_append_time,
                            set_offsets)
from rillet.storage import offset_files
from rillet.storage.leader_epoch import LeaderEpochCache
from rillet.storage.log_config import LogConfig
from rillet.storage.log_loader import LogLoader, new_segment, rebuild_producer_state
from rillet.storage.offset_files import (HIGH_WATERMARK_NAME, LOG_START_NAME, write_offset_file,
                                         write_recovery_point)
from rillet.storage.producer_state import ProducerStateManager
from rillet.storage.segment import LogSegment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class PartitionLog:
    """The log of one partition.

    Not thread-safe: every method is called from the event loop thread. The sync
    methods never await, so offset assignment in ``append`` is atomic with
    respect to other coroutines. Only ``flush`` leaves the loop, and its worker
    thread touches nothing but dup()ed file descriptors and files it writes.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], float]) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self._high_watermark = 0
        self._checkpointed_high_watermark: int | None = None
        self.producer_state = ProducerStateManager(directory)
        self.epochs = LeaderEpochCache(directory)
        self._flushed_offset = 0  # recovery point: everything below is fsynced
        self._written_recovery_point = 0
        self._last_flush_ms = self._now_ms()
        self._flush_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._dir_dirty = False
        self._roll_flush_due = False
        self._snapshot_due = False
        self._closed = False

    # ------------------------------------------------------------ open / recovery

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clock: Callable[[], float] = time.time) -> "PartitionLog":
        directory.mkdir(parents=True, exist_ok=True)
        plog = cls(directory, config, clock)
        plog._load()
        return plog

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _load(self) -> None:
        loaded = LogLoader(self.directory, self.config, self.producer_state, self.epochs,
                           self._now_ms()).load()
        for segment in loaded.segments:
            self._append_segment(segment)
        self.log_start_offset = loaded.log_start_offset
        self._flushed_offset = self._written_recovery_point = loaded.recovery_point
        self._high_watermark = loaded.high_watermark
        self._checkpointed_high_watermark = loaded.checkpointed_high_watermark
        self._dir_dirty = loaded.dir_dirty

    def checkpoint_high_watermark(self) -> None:
        """Record the high watermark (if it moved), so a restart never starts above it.

        Not fsynced: after a power loss an older, lower value is safe."""
        if self._closed or self._checkpointed_high_watermark == self._high_watermark:
            return
        write_offset_file(self.directory, HIGH_WATERMARK_NAME, self._high_watermark,
                          sync=False)
        self._checkpointed_high_watermark = self._high_watermark

    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producer_state, self._segments, self.log_start_offset)

    def _new_segment_object(self, base: int, now_ms: int) -> LogSegment:
        return new_segment(self.directory, self.config, base, now_ms)

    def _append_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    # ------------------------------------------------------------ properties

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self._high_watermark = min(max(value, self.log_start_offset), self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    @property
    def recovery_point(self) -> int:
        return self._flushed_offset

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, oldest first (tests, tools)."""
        return list(self._segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    # ------------------------------------------------------------ append

    def append(self, data: bytearray, headers: list[BatchHeader], *, leader_epoch: int) -> AppendInfo:
        """Assign offsets to the parsed batches in ``data`` and write them (page cache only).

        ``headers`` come from ``records.parse_batches(data)``: contiguous whole
        batches. Nothing is written when any batch is rejected; when a batch is a
        duplicate of a recent one from the same producer the whole append is a
        no-op returning the original's offsets (Kafka does the same).
        """
        if not headers:
            raise CorruptMessage("no record batches to append")
        self._check_sizes(headers)
        now_ms = self._now_ms()
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        staged = self.producer_state.begin()
        plan: list[tuple[BatchHeader, int, int]] = []
        offset = self.log_end_offset
        for header in headers:
            last = offset + header.last_offset_delta
            max_ts = now_ms if log_append_time else header.max_timestamp
            if header.producer_id >= 0:
                duplicate = staged.check(header)
                if duplicate is not None:
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                                      duplicate.timestamp if log_append_time else -1,
                                      self.log_start_offset, duplicate=True)
                staged.record(header, offset, last, max_ts)
            plan.append((header, offset, max_ts))
            offset = last + 1
        for header, base, _ in plan:
            set_offsets(data, header, base, leader_epoch)
            if log_append_time:
                set_log_append_time(data, header, now_ms)
        self._write(data, plan, now_ms)
        staged.commit()
        first = plan[0][1]
        self.epochs.assign(leader_epoch, first)
        if self._snapshot_due:
            self._snapshot_due = False
            self.producer_state.take_snapshot(self.log_end_offset)
        return AppendInfo(first, offset - 1, now_ms if log_append_time else -1, self.log_start_offset)

    def append_replicated(self, data: bytearray | bytes, headers: list[BatchHeader]) -> AppendInfo:
        """Follower side of replication: append the leader's batches as they are.

        Offsets, leader epochs and timestamps are kept; producer state and the
        epoch cache are updated from the batch headers without sequence checks
        (the leader did them). ``headers`` from ``parse_batches(data, strict=False)``.
        The first batch must start at or after the log end offset and offsets must
        increase (gaps are fine: compacted logs have them).
        """
        if not headers:
            raise CorruptMessage("no record batches to append")
        expected = self.log_end_offset
        for header in headers:
            if header.base_offset < expected:
                raise InvalidRecord(
                    f"replicated batch at offset {header.base_offset} is below the expected {expected}")
            expected = header.next_offset
        total = sum(h.size for h in headers)
        if total > self.config.segment_bytes:
            raise RecordListTooLarge(f"record set of {total} bytes exceeds segment.bytes {self.config.segment_bytes}")
        now_ms = self._now_ms()
        self._write(data, [(h, h.base_offset, h.max_timestamp) for h in headers], now_ms)
        for header in headers:
            self.producer_state.replay(header)
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        if self._snapshot_due:
            self._snapshot_due = False
            self.producer_state.take_snapshot(self.log_end_offset)
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset)

    def _check_sizes(self, headers: list[BatchHeader]) -> None:
        total = 0
        for header in headers:
            if header.size > self.config.max_message_bytes:
                raise MessageTooLarge(
                    f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}")
            total += header.size
        if total > self.config.segment_bytes:
            raise RecordListTooLarge(
                f"record set of {total} bytes exceeds segment.bytes {self.config.segment_bytes}")

    def _write(self, data: bytearray | bytes, plan: list[tuple[BatchHeader, int, int]], now_ms: int) -> None:
        """One os.write per segment touched (normally one)."""
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
                    segment = self._roll(base, now_ms)
                    group_start = header.position
                group.append((last, max_ts, header.size))
                end = header.position + header.size
            segment.append(view[group_start:end], group)
        except OSError as exc:
            raise KafkaStorageError(f"write to {segment.log_path} failed: {exc}") from exc
        finally:
            view.release()

    def _should_roll(self, segment: LogSegment, size: int, last_offset: int, max_ts: int, now_ms: int) -> bool:
        if segment.is_empty:
            return False
        if segment.size + size > self.config.segment_bytes or segment.index_full():
            return True
        if last_offset - segment.base_offset > INT32_MAX:
            return True  # relative offsets in the indexes are int32
        return self._time_waited(segment, max_ts, now_ms) > self.config.segment_ms

    @staticmethod
    def _time_waited(segment: LogSegment, timestamp: int, now_ms: int) -> int:
        """Kafka's rule: measured from the first batch's timestamp, else from segment creation."""
        if segment.first_batch_timestamp >= 0:
            return timestamp - segment.first_batch_timestamp
        return now_ms - segment.created_ms

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.is_empty and active.base_offset == base_offset:
            return active
        active.seal()
        segment = self._new_segment_object(base_offset, now_ms)
        self._append_segment(segment)
        self._dir_dirty = True
        self._roll_flush_due = True
        self._snapshot_due = True
        return segment

    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        self._roll(self.log_end_offset, self._now_ms())
        if self._snapshot_due:
            self._snapshot_due = False
            self.producer_state.take_snapshot(self.log_end_offset)

    def maybe_roll(self) -> None:
        """Time-based roll of an idle active segment (segment.ms since its first batch)."""
        active = self._segments[-1]
        now = self._now_ms()
        if not active.is_empty and self._time_waited(active, now, now) > self.config.segment_ms:
            self.roll()

    # ------------------------------------------------------------ flush

    def flush_due(self, now_ms: int) -> bool:
        """flush.ms elapsed since the last flush and there is something to flush."""
        return (self._flushed_offset < self.log_end_offset
                and now_ms - self._last_flush_ms >= self.config.flush_ms)

    def flush_pending(self) -> bool:
        """Whether `maybe_flush` has anything to do (cheap; lets callers skip the await)."""
        return (self._roll_flush_due
                or self.log_end_offset - self._flushed_offset >= self.config.flush_messages)

    async def maybe_flush(self) -> None:
        """Call after append: fsync now if flush.messages is reached; flush rolled segments in the background."""
        if self.log_end_offset - self._flushed_offset >= self.config.flush_messages:
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
        """fsync everything written so far, in a worker thread. Concurrent callers share one fsync."""
        target = self.log_end_offset
        # min(): a truncation while an fsync is in flight can leave the log shorter than
        # target for good; waiting for target then would start empty fsyncs forever.
        while self._flushed_offset < min(target, self.log_end_offset) and not self._closed:
            task = self._flush_task
            if task is None:
                task = self._flush_task = asyncio.get_running_loop().create_task(self._flush_once())
            await asyncio.shield(task)

    async def _flush_once(self) -> None:
        try:
            leo = self.log_end_offset
            fds: list[int] = []
            taken: list[tuple[LogSegment, tuple[bool, bool, bool]]] = []
            for segment in self._segments:
                segment_fds, flags = segment.take_dirty()
                if segment_fds:
                    fds += segment_fds
                    taken.append((segment, flags))
            epochs = self.epochs.path if self.epochs.dirty else None
            self.epochs.dirty = False
            sync_dir = self._dir_dirty or epochs is not None
            self._dir_dirty = False
            # Writing the recovery point only matters when it crosses into another segment.
            rp = leo if bisect_right(self._bases, leo) != bisect_right(self._bases, self._written_recovery_point) else None
            try:
                await asyncio.to_thread(offset_files.sync_files, self.directory, fds, sync_dir, epochs, rp)
            except OSError as exc:
                # Everything handed to this fsync still needs one: the next flush retries it.
                for segment, flags in taken:
                    segment.restore_dirty(flags)
                self.epochs.dirty = self.epochs.dirty or epochs is not None
                self._dir_dirty = True
                raise KafkaStorageError(f"flush of {self.directory} failed: {exc}") from exc
            if rp is not None:
                self._written_recovery_point = rp
            self._flushed_offset = max(self._flushed_offset, min(leo, self.log_end_offset))
            self._last_flush_ms = self._now_ms()
        finally:
            self._flush_task = None

    # ------------------------------------------------------------ reads

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def batches(self, chunk_bytes: int = 1 << 20) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the log start to the end as it is now, with its bytes, in order.

        For replays (metadata, group offsets, tests): reads ``chunk_bytes`` at a time, so a
        long log is never held whole. Batches were validated when appended or recovered.
        A header's ``position`` is within the chunk it was read from, not within its bytes.
        """
        offset = self.log_start_offset
        end = self.log_end_offset
        while offset < end:
            chunk = self.read(offset, chunk_bytes)
            if not chunk:
                return
            pos = 0
            while pos < len(chunk):
                header = read_header(chunk, pos)
                yield header, chunk[pos:pos + header.size]
                pos += header.size
                offset = header.next_offset

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``; see the storage spec for the bounds."""
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {leo}] of {self.directory.name}")
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return b""
        for segment in self._segments[self._segment_index(offset):]:
            if offset >= segment.next_offset:
                continue
            return segment.read(offset, max_bytes, max_offset, min_one_batch)
        return b""

    def read_slices(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                    min_one_batch: bool = True) -> list[tuple[int, int, int]]:
        """What ``read`` would return, as (fd, position, length) for os.sendfile, without copying it.

        The descriptor belongs to the segment: use it before the next await (retention
        may close it) or dup() it.
        """
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {leo}] of {self.directory.name}")
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return []
        for segment in self._segments[self._segment_index(offset):]:
            if offset >= segment.next_offset:
                continue
            position, length = segment.byte_range(offset, max_bytes, max_offset, min_one_batch)
            return [(segment.fileno(), position, length)] if length else []
        return []

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``, None if none."""
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
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
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

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # ------------------------------------------------------------ truncation, retention

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (a batch straddling it goes whole)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self._truncate_fully(max(offset, 0))
        else:
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._bases.pop()
                self._segments.pop().delete()
            self._segments[-1].truncate_to(offset)
        leo = self.log_end_offset
        self.epochs.truncate_from_end(leo)
        self.producer_state.truncate_to(leo)
        self._rebuild_producer_state()
        self._high_watermark = min(self._high_watermark, leo)
        self._flushed_offset = min(self._flushed_offset, leo)
        if self._written_recovery_point > leo:
            # New appends will reuse these offsets unflushed: the file must not vouch for them.
            write_recovery_point(self.directory, leo, sync=False)
            self._written_recovery_point = leo
        self._dir_dirty = True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and continue at ``offset`` (a follower far behind the leader's start)."""
        self._truncate_fully(offset)
        self.epochs.truncate_from_end(-1)
        self.producer_state.truncate_to(-1)
        self.producer_state.producers = {}
        self._high_watermark = self._flushed_offset = self._written_recovery_point = offset
        self._dir_dirty = True

    def _truncate_fully(self, start: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments, self._bases = [], []
        self._append_segment(self._new_segment_object(start, self._now_ms()))
        self.log_start_offset = start
        write_recovery_point(self.directory, start, sync=False)
        (self.directory / LOG_START_NAME).unlink(missing_ok=True)   # the first segment says it

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes; returns how many.

        Also expires idle producers (producer.id.expiration.ms), whatever the cleanup policy.
        """
        now = self._now_ms() if now_ms is None else now_ms
        # Idle idempotent producers are forgotten after producer.id.expiration.ms, as in Kafka,
        # so short-lived clients do not pile up (their next batch is then accepted as unknown).
        self.producer_state.remove_expired(now, self.config.producer_id_expiration_ms)
        if "delete" not in self.config.cleanup_policy:
            return 0
        deleted = 0
        if self.config.retention_ms >= 0:
            deleted += self._delete_oldest(lambda seg, _: now - seg.largest_timestamp > self.config.retention_ms)
        if self.config.retention_bytes >= 0:
            excess = [self.size_bytes - self.config.retention_bytes]

            def over_size(seg: LogSegment, _: int) -> bool:
                if excess[0] - seg.size < 0:
                    return False
                excess[0] -= seg.size
                return True

            deleted += self._delete_oldest(over_size)
        return deleted

    def advance_log_start(self, offset: int) -> bool:
        """DeleteRecords: records below `offset` (at most the high watermark) are gone for
        readers at once; whole segments below it are deleted. Persisted, so a restart keeps
        it. True if the log start moved."""
        offset = min(offset, self._high_watermark)
        if offset <= self.log_start_offset:
            return False
        self._delete_oldest(lambda _segment, upper: upper <= offset)
        self.log_start_offset = max(self.log_start_offset, offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.producer_state.remove_before(self.log_start_offset)
        write_offset_file(self.directory, LOG_START_NAME, self.log_start_offset, sync=True)
        return True

    def delete_segments_before(self, offset: int) -> int:
        """Delete whole segments that end at or below ``offset`` (a snapshot covers them)."""
        return self._delete_oldest(lambda _segment, upper: upper <= offset)

    def _delete_oldest(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete oldest segments while ``predicate`` holds and all their data is below the HW."""
        doomed: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            upper = self._bases[i + 1] if i + 1 < len(self._segments) else self.log_end_offset
            if segment.is_empty or upper > self._high_watermark or not predicate(segment, upper):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll()  # Kafka rolls so an idle topic's expired active segment can go too
        for segment in doomed:
            segment.delete()
        del self._segments[: len(doomed)]
        del self._bases[: len(doomed)]
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self._high_watermark = max(self._high_watermark, self.log_start_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.producer_state.remove_before(self.log_start_offset)
        self._dir_dirty = True
        log.info("%s: retention deleted %d segment(s), log start offset now %d",
                 self.directory.name, len(doomed), self.log_start_offset)
        return len(doomed)

    # ------------------------------------------------------------ lifecycle

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
            for path in (*files, old.log_path):
                path.unlink(missing_ok=True)
            del self._segments[index]
            del self._bases[index]
            return old
        os.replace(data, old.log_path)
        os.replace(offset_index, old.offset_index.path)
        os.replace(time_index, old.time_index.path)
        fresh = self._new_segment_object(base_offset, self._now_ms())
        if not fresh.load():
            fresh.recover()
        self._segments[index] = fresh
        return old

    def close(self) -> None:
        """Close files. Call ``flush`` first for durability (LogManager.close does)."""
        if self._closed:
            return
        try:
            self.producer_state.take_snapshot(self.log_end_offset)
            self.checkpoint_high_watermark()
            if self._flushed_offset >= self.log_end_offset:
                write_recovery_point(self.directory, self._flushed_offset, sync=False)
        except OSError:
            log.exception("%s: could not write state on close", self.directory)
        self._closed = True
        for task in list(self._background):
            task.cancel()
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

