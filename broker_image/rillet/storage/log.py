"""PartitionLog: the log of one partition (Kafka's UnifiedLog).

Directory ``<log.dir>/<topic>-<partition>`` holds:
- ``<base>.log`` / ``.index`` / ``.timeindex`` per segment (20-digit zero-padded base offset);
- ``<offset>.snapshot`` producer-state snapshots (producer_state.py);
- ``leader-epoch-checkpoint`` (leader_epoch.py);
- ``recovery-point``, ``high-watermark``, ``log-start-offset`` (offset_files.py).

The segments and what touches only them (writes, rolls, reads, fsync) are LocalLog's
(local_log.py); opening the directory after a clean or an unclean stop is LogLoader's
(log_loader.py). This class owns what the bytes mean: offset assignment and producer
(idempotence, transaction) checks, the leader-epoch cache, the high watermark, the last
stable offset, the log start offset, retention and truncation decisions.

Durability: ``append`` only writes to the page cache (survives kill -9, not
power loss). ``flush`` fsyncs in a worker thread. With flush.messages=1 the
caller awaits ``maybe_flush`` before acknowledging, so every ack is on disk.
With the default policy (Kafka's: never force) an acks=1 ack means "in the OS
page cache of the leader": it survives a broker crash, not a machine crash;
rolled segments are fsynced in the background as Kafka does.
"""
from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rillet.protocol.errors import (
    CorruptMessage,
    InvalidRecord,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from rillet.records import BatchHeader, read_header, set_log_append_time, set_offsets
from rillet.storage.leader_epoch import LeaderEpochCache
from rillet.storage.local_log import LocalLog
from rillet.storage.log_config import LogConfig
from rillet.storage.log_loader import LogLoader, rebuild_producer_state
from rillet.storage.offset_files import (HIGH_WATERMARK_NAME, LOG_START_NAME, write_offset_file,
                                         write_recovery_point)
from rillet.storage.producer_state import ProducerStateManager
from rillet.storage.segment import LogSegment
from rillet.storage.transactions import index_aborts, marker_in
from rillet.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)


def _nobody() -> None:
    pass


@dataclass(frozen=True)
class AppendInfo:
    """Where an append went: its offsets, the log start, whether it was a duplicate."""
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class PartitionLog:
    """The log of one partition.

    Not thread-safe: every method is called from the event loop thread. The sync
    methods never await, so offset assignment in ``append`` is atomic with
    respect to other coroutines. Only ``flush`` leaves the loop.
    """

    def __init__(self, directory: Path, config: LogConfig, local: LocalLog,
                 producer_state: ProducerStateManager, epochs: LeaderEpochCache,
                 log_start_offset: int, high_watermark: int,
                 checkpointed_high_watermark: int | None) -> None:
        self.directory = directory
        self.config = config
        self.local = local
        self.producer_state = producer_state
        self.epochs = epochs
        self.log_start_offset = log_start_offset
        self._high_watermark = high_watermark
        self._checkpointed_high_watermark = checkpointed_high_watermark
        # Called after every move of the log end, the high watermark or the log start, by
        # whatever made it (LogManager sets it): the one notification the leader's fetch
        # sessions, the follower's fetch positions and the HW checkpoints rely on, so none
        # of them walks every partition to find what moved.
        self.on_moved: Callable[[], None] = _nobody
        self.on_config_changed: Callable[[], None] = _nobody   # its flush.ms may differ

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *,
             clock: Callable[[], float] = time.time) -> "PartitionLog":
        directory.mkdir(parents=True, exist_ok=True)
        producer_state = ProducerStateManager(directory)
        epochs = LeaderEpochCache(directory)
        loaded = LogLoader(directory, config, producer_state, epochs,
                           int(clock() * 1000)).load()
        local = LocalLog(directory, config, clock, loaded.segments, loaded.recovery_point,
                         loaded.dir_dirty, epochs)
        return cls(directory, config, local, producer_state, epochs, loaded.log_start_offset,
                   loaded.high_watermark, loaded.checkpointed_high_watermark)

    def checkpoint_high_watermark(self) -> bool:
        """Record the high watermark (if it moved), so a restart never starts above it;
        True when the file was written.

        Not fsynced: after a power loss an older, lower value is safe."""
        if self.local.closed or self._checkpointed_high_watermark == self._high_watermark:
            return False
        write_offset_file(self.directory, HIGH_WATERMARK_NAME, self._high_watermark,
                          sync=False)
        self._checkpointed_high_watermark = self._high_watermark
        return True

    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producer_state, self.local.segments, self.log_start_offset)

    # ------------------------------------------------------------ properties

    @property
    def log_end_offset(self) -> int:
        return self.local.end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.set_high_watermark(value)

    def set_high_watermark(self, value: int, *, notify: bool = True) -> None:
        """Move the high watermark (kept within [log start, log end]). ``notify=False``: the
        caller sends the one ``on_moved`` itself, after the append that moved it too."""
        value = min(max(value, self.log_start_offset), self.local.end_offset)
        if value != self._high_watermark:
            self._high_watermark = value
            if notify:
                self.on_moved()

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided on every in-sync replica (read_committed
        reads stop here): the first offset of the oldest undecided one, else the HW."""
        first = self.producer_state.first_unstable_offset(self._high_watermark)
        if first is None:
            return self._high_watermark
        # Retention may have deleted the start of an open transaction (as Kafka allows).
        return min(max(first, self.log_start_offset), self._high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions holding offsets in [fetch_offset, upper_offset)."""
        return self.local.aborted_transactions(fetch_offset, upper_offset)

    @property
    def size_bytes(self) -> int:
        return self.local.size_bytes

    @property
    def segment_count(self) -> int:
        return self.local.segment_count

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    @property
    def recovery_point(self) -> int:
        return self.local.flushed_offset

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, oldest first (tests, tools)."""
        return self.local.segments

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.local.update_config(config)
        self.on_config_changed()

    # ------------------------------------------------------------ append

    def append(self, data: bytearray, headers: list[BatchHeader], *, leader_epoch: int,
               notify: bool = True) -> AppendInfo:
        """Assign offsets to the parsed batches in ``data`` and write them (page cache only).

        ``headers`` come from ``records.parse_batches(data)``: contiguous whole
        batches. Nothing is written when any batch is rejected; when a batch is a
        duplicate of a recent one from the same producer the whole append is a
        no-op returning the original's offsets (Kafka does the same).
        ``notify=False``: the caller calls ``on_moved`` once it moved the high watermark
        too (the leader's append: one notification, not two, per produced batch).
        """
        if not headers:
            raise CorruptMessage("no record batches to append")
        self._check_sizes(headers)
        now_ms = self.local.now_ms()
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        staged = self.producer_state.begin()
        plan: list[tuple[BatchHeader, int, int]] = []
        offset = self.log_end_offset
        for header in headers:
            last = offset + header.last_offset_delta
            max_ts = now_ms if log_append_time else header.max_timestamp
            if header.producer_id >= 0:
                marker = marker_in(data, header)
                duplicate = staged.check(header, marker)
                if duplicate is not None:
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                                      duplicate.timestamp if log_append_time else -1,
                                      self.log_start_offset, duplicate=True)
                staged.record(header, offset, last, max_ts, marker)
            plan.append((header, offset, max_ts))
            offset = last + 1
        for header, base, _ in plan:
            set_offsets(data, header, base, leader_epoch)
            if log_append_time:
                set_log_append_time(data, header, now_ms)
        self.local.write(data, plan, now_ms)
        index_aborts(self.producer_state, staged.commit(), self.local.segment_holding)
        first = plan[0][1]
        self.epochs.assign(leader_epoch, first)
        self._snapshot_if_rolled()
        if notify:
            self.on_moved()
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
        # Markers are decoded before anything is written: a bad one fails the whole append.
        markers = [marker_in(data, h) for h in headers]
        now_ms = self.local.now_ms()
        self.local.write(data, [(h, h.base_offset, h.max_timestamp) for h in headers], now_ms)
        for header, marker in zip(headers, markers):
            ended = self.producer_state.replay(header, marker)
            if ended is not None:
                # Indexed at once: an abort's stable offset is the one at its marker, before
                # later batches of the chunk open or close other transactions (as the leader
                # and a replay from disk record it).
                index_aborts(self.producer_state, [ended], self.local.segment_holding)
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        self._snapshot_if_rolled()
        self.on_moved()
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

    def _snapshot_if_rolled(self) -> None:
        """A producer-state snapshot at each new segment, as Kafka takes one on roll: loading
        then replays at most one segment's batches."""
        if self.local.rolled:
            self.local.rolled = False
            self.producer_state.take_snapshot(self.log_end_offset)

    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        self.local.roll(self.log_end_offset, self.local.now_ms())
        self._snapshot_if_rolled()

    def maybe_roll(self) -> None:
        """Time-based roll of an idle active segment (segment.ms since its first batch)."""
        if self.local.active_segment_expired():
            self.roll()

    # ------------------------------------------------------------ flush

    def flush_due(self, now_ms: int) -> bool:
        """flush.ms elapsed since the last flush and there is something to flush."""
        return self.local.flush_due(now_ms)

    def flush_due_at(self) -> float:
        """When `flush_due` turns true, as things stand: math.inf with nothing to flush."""
        return self.local.flush_due_at()

    def flush_pending(self) -> bool:
        """Whether `maybe_flush` has anything to do (cheap; lets callers skip the await)."""
        return self.local.flush_pending()

    async def maybe_flush(self) -> None:
        """Call after append: fsync now if flush.messages is reached; flush rolled segments in
        the background."""
        await self.local.maybe_flush()

    async def flush(self) -> None:
        """fsync everything written so far, in a worker thread. Concurrent callers share one
        fsync."""
        await self.local.flush()

    # ------------------------------------------------------------ reads

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

    def _readable(self, offset: int, max_offset: int | None) -> bool:
        """False when nothing is to be read at `offset`; OffsetOutOfRange outside the log."""
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, "
                                   f"{leo}] of {self.directory.name}")
        return not (offset == leo or (max_offset is not None and offset >= max_offset))

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``; see the storage spec for the bounds."""
        if not self._readable(offset, max_offset):
            return b""
        return self.local.read(offset, max_bytes, max_offset, min_one_batch)

    def read_slices(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                    min_one_batch: bool = True) -> list[tuple[int, int, int]]:
        """What ``read`` would return, as (fd, position, length) for os.sendfile, without copying it.

        The descriptor belongs to the segment: use it before the next await (retention
        may close it) or dup() it.
        """
        if not self._readable(offset, max_offset):
            return []
        return self.local.read_slices(offset, max_bytes, max_offset, min_one_batch)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``, None if none."""
        return self.local.offset_for_timestamp(timestamp_ms)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp."""
        return self.local.max_timestamp()

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
            self.local.truncate_to(offset)
        leo = self.log_end_offset
        self.epochs.truncate_from_end(leo)
        self.producer_state.truncate_to(leo)
        self._rebuild_producer_state()
        self._high_watermark = min(self._high_watermark, leo)
        self.on_moved()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and continue at ``offset`` (a follower far behind the leader's start)."""
        self._truncate_fully(offset)
        self.epochs.truncate_from_end(-1)
        self.producer_state.truncate_to(-1)
        self.producer_state.clear()
        self._high_watermark = offset
        self.local.restart_at(offset)
        self.on_moved()

    def _truncate_fully(self, start: int) -> None:
        self.local.truncate_fully(start)
        self.log_start_offset = start
        (self.directory / LOG_START_NAME).unlink(missing_ok=True)   # the first segment says it

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes; returns how many.

        Also expires idle producers (producer.id.expiration.ms), whatever the cleanup policy.
        """
        now = self.local.now_ms() if now_ms is None else now_ms
        # Idle idempotent producers are forgotten after producer.id.expiration.ms, as in Kafka,
        # so short-lived clients do not pile up (their next batch is then accepted as unknown).
        self.producer_state.remove_expired(now, self.config.producer_id_expiration_ms)
        if "delete" not in self.config.cleanup_policy:
            return 0
        deleted = 0
        if self.config.retention_ms >= 0:
            deleted += self._delete_oldest(
                lambda seg, _: now - seg.largest_timestamp > self.config.retention_ms)
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
        self.on_moved()
        return True

    def delete_segments_before(self, offset: int) -> int:
        """Delete whole segments that end at or below ``offset`` (a snapshot covers them)."""
        return self._delete_oldest(lambda _segment, upper: upper <= offset)

    def _delete_oldest(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete oldest segments while ``predicate`` holds and all their data is below the HW."""
        count = self.local.deletable_prefix(predicate, self._high_watermark)
        if not count:
            return 0
        if count == self.local.segment_count:
            self.roll()  # Kafka rolls so an idle topic's expired active segment can go too
        self.local.delete_oldest(count)
        self.log_start_offset = max(self.log_start_offset, self.local.first_base_offset)
        self._high_watermark = max(self._high_watermark, self.log_start_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.producer_state.remove_before(self.log_start_offset)
        log.info("%s: retention deleted %d segment(s), log start offset now %d",
                 self.directory.name, count, self.log_start_offset)
        self.on_moved()
        return count

    # ------------------------------------------------------------ lifecycle

    def swap_cleaned_segment(self, base_offset: int, expected_size: int,
                             files: tuple[Path, Path, Path]) -> LogSegment | None:
        """Put the log cleaner's compacted copy of a closed segment in its place (see
        LocalLog.swap_cleaned_segment)."""
        return self.local.swap_cleaned_segment(base_offset, expected_size, files)

    def close(self) -> None:
        """Close files. Call ``flush`` first for durability (LogManager.close does)."""
        if self.local.closed:
            return
        try:
            self.producer_state.take_snapshot(self.log_end_offset)
            self.checkpoint_high_watermark()
            if self.local.flushed_offset >= self.log_end_offset:
                write_recovery_point(self.directory, self.local.flushed_offset, sync=False)
        except OSError:
            log.exception("%s: could not write state on close", self.directory)
        self.local.close()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
