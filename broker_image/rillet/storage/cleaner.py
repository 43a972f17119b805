"""Log compaction: keep the latest record per key in the closed segments of compacted logs.

For every log whose cleanup.policy contains "compact" the cleaner
periodically (log.cleaner.backoff.ms) checks the dirty ratio
(min.cleanable.dirty.ratio) and then, in a worker thread:

1. builds a map key -> last offset over the closed segments that are older
   than min.compaction.lag.ms (the active segment is never touched); dirty
   data older than max.compaction.lag.ms is cleaned whatever the ratio;
2. rewrites each of those segments into ``<base>.log.cleaned`` (plus its
   ``.index.cleaned`` / ``.timeindex.cleaned``): a record stays when it is
   the latest for its key; a latest-record tombstone (null value) stays until
   its segment is older than delete.retention.ms. Offsets are kept as they
   were (gaps are normal in a compacted log). A batch that loses no record is
   copied byte for byte; one that loses some is decoded (any codec),
   filtered and re-encoded with the same codec, producer id/epoch/sequence,
   leader epoch and last offset delta; one that loses all is dropped.

Transactions (Kafka's cleaner does the same): nothing at or past the last stable offset
is cleaned (a segment ending above it waits), so an open transaction's records stay whole
and its outcome is known before any key is superseded; batches of aborted transactions
(from the segments' aborted-transactions indexes) are dropped and never count as a key's
latest value. A COMMIT/ABORT marker is removed once none of its transaction's data is left
and its delete horizon (delete.retention.ms later) passed (txn_cleaning.py).

Back on the event loop each cleaned segment is swapped in one at a time
(`swap_in_cleaned`): the old indexes are unlinked, the cleaned data file is
renamed over the old one (atomic), then the cleaned indexes are renamed in.
A crash at any point leaves either the old or the new data file, plus at
most stray ``.cleaned`` files (deleted by recovery) or missing indexes
(rebuilt by recovery). A segment (other than the first) left with no
record is deleted instead: all of it is superseded later in the log. Segments are never merged: merging would need a swap
that recovery completes, and recovery here deletes ``.swap`` files.

Where each log's cleaned part ends (and when a kept tombstone may expire) is
kept in ``<log.dir>/cleaner-offset-checkpoint`` ("topic partition offset
due-ms" lines), so a restart does not re-clean everything; a stale or lost
checkpoint only costs an extra pass, never data.

Thread-safety: the worker thread only reads closed segment files through
its own descriptors and writes ``.cleaned`` files; the PartitionLog and its
segment list are touched only on the event loop (in the swap), which checks
that the segment is still there and unchanged (retention may have removed it
meanwhile).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from crc32c import crc32c

from ..defs.topic_defs import topic_value
from ..protocol.errors import CorruptMessage
from ..records import (CRC_OFFSET, CRC_START, LAST_OFFSET_DELTA_OFFSET, BatchHeader, Record,
                       decode_records, encode_batch)
from .segment import (INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, scan_batches,
                      segment_name)
from .txn_cleaning import TxnCleaning, drop_obsolete_aborts, fsync_and_close
from .txn_index import AbortedRanges, aborted_ranges, is_aborted

log = logging.getLogger(__name__)

CLEANED = ".cleaned"
CHECKPOINT_NAME = "cleaner-offset-checkpoint"
RETIRE_DELAY_S = 10.0
_LAST_OFFSET_DELTA = struct.Struct(">i")
_CRC = struct.Struct(">I")


@dataclass(frozen=True)
class SegmentFile:
    """A closed segment as the worker thread sees it (a snapshot taken on the loop)."""
    base_offset: int
    path: Path
    size: int
    mtime_ms: int
    largest_timestamp: int
    end_offset: int = 0      # the offset after its last batch


@dataclass(frozen=True)
class CleaningConfig:
    """The topic configs one compaction pass follows."""
    delete_retention_ms: int
    min_compaction_lag_ms: int
    min_cleanable_ratio: float
    max_compaction_lag_ms: int = 2**63 - 1
    index_interval_bytes: int = 4096
    max_index_bytes: int = 10485760


@dataclass
class CleanedSegment:
    """One segment a pass wrote, to be swapped in for its sources."""
    base_offset: int
    source_size: int
    log_path: Path
    index_path: Path
    time_index_path: Path
    size: int


@dataclass
class CleanResult:
    """What one pass over a log did: segments written, records kept, when to come back."""
    segments: list[CleanedSegment] = field(default_factory=list)
    end_offset: int = 0          # next offset after the last cleanable segment
    records_before: int = 0
    records_after: int = 0
    # When the next pass is due for deletes: the oldest kept tombstone's segment mtime +
    # delete.retention.ms, or the earliest delete horizon of a kept marker.
    earliest_tombstone_ms: int | None = None
    obsolete_aborts: set[tuple[int, int]] = field(default_factory=set)  # txn_cleaning.py


# -- worker thread part (pure file work) ---------------------------------------------


def iter_batches(seg: SegmentFile) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Whole batches of a closed segment file, read in chunks with our own descriptor.

    CRCs are checked, and a segment that does not end with a whole valid batch
    raises CorruptMessage: cleaning only its valid prefix would drop the rest
    of the segment when the copy is swapped in.
    """
    fd = os.open(seg.path, os.O_RDONLY)
    try:
        end = 0
        for header, batch in scan_batches(fd, 0, seg.size, verify=True):
            assert batch is not None  # verify=True always yields the bytes
            yield header, batch
            end = header.position + header.size
    finally:
        os.close(fd)
    if end != seg.size:
        raise CorruptMessage(f"{seg.path}: no valid batch at byte {end} of {seg.size}; not cleaned")


def build_offset_map(segments: list[SegmentFile],
                     aborted: AbortedRanges | None = None) -> dict[bytes, int]:
    """key -> offset of its latest record in these segments (aborted batches left out)."""
    latest: dict[bytes, int] = {}
    for seg in segments:
        for header, data in iter_batches(seg):
            if header.is_control or (aborted and is_aborted(header, aborted)):
                continue
            _, records = decode_records(data)
            for rec in records:
                if rec.key is not None:
                    latest[rec.key] = rec.offset
    return latest


def _keep(rec: Record, latest: dict[bytes, int], drop_tombstones: bool) -> bool:
    if rec.key is None:
        return True  # a compacted topic rejects null keys at produce; old data stays
    if latest.get(rec.key, -1) > rec.offset:
        return False
    return not (rec.value is None and drop_tombstones)


def rewrite_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """Re-encode the kept records of a batch with the batch's own codec and identity."""
    out = bytearray(encode_batch(
        kept, base_offset=header.base_offset, compression=header.compression,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, leader_epoch=header.partition_leader_epoch,
        is_control=header.is_control, is_transactional=header.is_transactional,
        timestamp_type=header.timestamp_type))
    # Keep the original last offset delta (as Kafka does) so the batch still
    # covers the same offsets and the producer's last sequence is unchanged.
    _LAST_OFFSET_DELTA.pack_into(out, LAST_OFFSET_DELTA_OFFSET, header.last_offset_delta)
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


class _CleanedWriter:
    """Writes one cleaned segment: a LogSegment with ``.cleaned`` names, so its index rule is the log's."""

    def __init__(self, directory: Path, base: int, cfg: CleaningConfig) -> None:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            # A leftover from an interrupted pass: LogSegment appends to what it finds.
            (directory / (segment_name(base, suffix) + CLEANED)).unlink(missing_ok=True)
        self.segment = LogSegment(directory, base, index_interval_bytes=cfg.index_interval_bytes,
                                  max_index_bytes=cfg.max_index_bytes, suffix=CLEANED)
        self.log_path = self.segment.log_path
        self.index_path = self.segment.offset_index.path
        self.time_index_path = self.segment.time_index.path

    @property
    def size(self) -> int:
        return self.segment.size

    def write(self, header: BatchHeader, data: bytes | memoryview) -> None:
        self.segment.append(memoryview(data), [(header.last_offset, header.max_timestamp, len(data))])

    def finish(self, mtime_ms: int) -> None:
        segment = self.segment
        segment.seal()
        for fd in (os.dup(segment.fileno()), segment.offset_index.dup_fd(), segment.time_index.dup_fd()):
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        segment.close()
        # Keep the source's age: tombstone expiry (delete.retention.ms) counts from it.
        os.utime(self.log_path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    def abort(self) -> None:
        self.segment.delete()


def clean_segments(directory: Path, segments: list[SegmentFile], cfg: CleaningConfig,
                   now_ms: int, aborted: AbortedRanges | None = None) -> CleanResult:
    """The worker-thread part: write cleaned copies of the segments that lose records."""
    result = CleanResult()
    if not segments:
        return result
    aborted = aborted or {}
    latest = build_offset_map(segments, aborted)
    horizon = now_ms - cfg.delete_retention_ms
    txns = TxnCleaning(now_ms, cfg.delete_retention_ms)
    for seg in segments:
        drop_tombstones = seg.mtime_ms <= horizon
        writer = _CleanedWriter(directory, seg.base_offset, cfg)
        changed = False
        holds_tombstone = False
        try:
            for header, data in iter_batches(seg):
                if header.is_control:
                    marker = txns.on_marker(header, data)
                    changed = changed or marker is not data
                    if marker is not None:
                        writer.write(header, marker)
                    continue
                if is_aborted(header, aborted):
                    txns.on_data_batch(header, kept_any=False)
                    result.records_before += header.records_count
                    changed = True
                    continue
                _, records = decode_records(data)
                kept = [r for r in records if _keep(r, latest, drop_tombstones)]
                txns.on_data_batch(header, kept_any=bool(kept))
                result.records_before += len(records)
                result.records_after += len(kept)
                holds_tombstone = holds_tombstone or any(r.value is None for r in kept)
                if len(kept) == len(records):
                    writer.write(header, data)
                    continue
                changed = True
                if kept:
                    writer.write(header, rewrite_batch(header, kept))
        except BaseException:
            writer.abort()
            raise
        if holds_tombstone:
            due = seg.mtime_ms + cfg.delete_retention_ms
            result.earliest_tombstone_ms = _earliest(result.earliest_tombstone_ms, due)
        if not changed:
            writer.abort()
            continue
        writer.finish(seg.mtime_ms)
        result.segments.append(CleanedSegment(seg.base_offset, seg.size, writer.log_path,
                                              writer.index_path, writer.time_index_path,
                                              writer.size))
    result.earliest_tombstone_ms = _earliest(result.earliest_tombstone_ms, txns.earliest_due_ms)
    result.obsolete_aborts = txns.obsolete_aborts
    return result


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


# -- event loop part ---------------------------------------------------------------


def swap_in_cleaned(plog: Any, cleaned: CleanedSegment) -> bool:
    """Replace one closed segment of `plog` by its cleaned copy; False if it changed meanwhile.

    Runs on the event loop (PartitionLog is not thread-safe); the crash-safe file
    order is PartitionLog.swap_cleaned_segment's. The old segment's descriptors are
    closed RETIRE_DELAY_S later, so an in-flight read of the old file finishes on
    the old inode.
    """
    old = plog.swap_cleaned_segment(
        cleaned.base_offset, cleaned.source_size,
        (cleaned.log_path, cleaned.index_path, cleaned.time_index_path))
    if old is None:
        return False
    _retire(old)
    return True


def _retire(segment: LogSegment) -> None:
    """Close a replaced segment's descriptors a little later, not now.

    A fetch may still be sending from them (read_slices / sendfile); they keep
    the old inode readable until closed, as Kafka's file.delete.delay.ms does.
    """
    try:
        asyncio.get_running_loop().call_later(RETIRE_DELAY_S, segment.close)
    except RuntimeError:  # no loop (tools, tests): nobody can be reading
        segment.close()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _LogState:
    """What the cleaner remembers of one log between passes."""
    cleaned_upto: int = 0                # closed segments below this were cleaned
    tombstone_due_ms: int | None = None  # a kept tombstone may expire at this time


class LogCleaner:
    """Owner of compaction for every compacted log of a LogManager (see the module doc)."""

    def __init__(self, logs: Any, broker_config: Any,
                 topic_overrides: Callable[[str], dict[str, str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.logs = logs
        self.broker_config = broker_config
        self.topic_overrides = topic_overrides
        self._clock = clock
        self._state: dict[tuple[str, int], _LogState] = {}
        self._checkpoints_loaded = False
        self.passes = 0  # completed cleanings (tests, metrics)

    # -- cleaner-offset-checkpoint: where each log's clean part ends, across restarts --

    def _checkpoint_path(self, log_dir: Path) -> Path:
        return log_dir / CHECKPOINT_NAME

    def _load_checkpoints(self) -> None:
        """Read each log dir's checkpoint; a missing or bad one just means "all dirty"."""
        self._checkpoints_loaded = True
        for log_dir in getattr(self.logs, "log_dirs", []):
            try:
                lines = self._checkpoint_path(log_dir).read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    topic, partition, upto, due = line.rsplit(" ", 3)
                    self._state[(topic, int(partition))] = _LogState(
                        int(upto), None if due == "-" else int(due))
                except ValueError:
                    log.warning("%s: ignoring bad line %r", self._checkpoint_path(log_dir), line)

    def _save_checkpoint(self, log_dir: Path) -> None:
        """Rewrite one log dir's checkpoint (tmp file + rename; a stale one is harmless)."""
        lines = []
        for (topic, partition), plog in sorted(self.logs.logs().items()):
            state = self._state.get((topic, partition))
            if state is None or plog.directory.parent != log_dir:
                continue
            due = "-" if state.tombstone_due_ms is None else str(state.tombstone_due_ms)
            lines.append(f"{topic} {partition} {state.cleaned_upto} {due}\n")
        path = self._checkpoint_path(log_dir)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(lines))
        os.replace(tmp, path)

    def cleaning_config(self, topic: str, plog: Any) -> CleaningConfig:
        overrides = self.topic_overrides(topic)

        def v(key: str) -> Any:
            return topic_value(self.broker_config, overrides, key)
        return CleaningConfig(delete_retention_ms=v("delete.retention.ms"),
                              min_compaction_lag_ms=v("min.compaction.lag.ms"),
                              min_cleanable_ratio=v("min.cleanable.dirty.ratio"),
                              max_compaction_lag_ms=v("max.compaction.lag.ms"),
                              index_interval_bytes=plog.config.index_interval_bytes,
                              max_index_bytes=plog.config.segment_index_bytes)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # Read each pass: broker_config is replaced when dynamic configs change.
            backoff = self.broker_config["log.cleaner.backoff.ms"] / 1000
            try:
                await self.clean_all(stop)
            except Exception:
                log.exception("log cleaner pass failed")
            try:
                await asyncio.wait_for(stop.wait(), backoff)
            except asyncio.TimeoutError:
                pass

    async def clean_all(self, stop: asyncio.Event | None = None) -> int:
        """One pass over every compacted log, cleaning up to log.cleaner.threads logs at
        once (read each pass: it is a dynamic config); the number of segments swapped.

        A log whose cleaning fails is logged and skipped; the others are still cleaned.
        """
        slots = asyncio.Semaphore(max(1, self.broker_config["log.cleaner.threads"]))

        async def one(topic: str, partition: int, plog: Any) -> int:
            async with slots:
                if stop is not None and stop.is_set():
                    return 0
                try:
                    return await self.clean_log(topic, partition, plog)
                except Exception:
                    log.exception("cleaning %s-%d failed", topic, partition)
                    return 0
        jobs = [one(topic, partition, plog)
                for (topic, partition), plog in self.logs.logs().items()
                if "compact" in plog.config.cleanup_policy.split(",")]
        return sum(await asyncio.gather(*jobs))

    def _cleanable(self, plog: Any, cfg: CleaningConfig, now: int) -> list[SegmentFile]:
        closed = plog.segments[:-1]
        stable = plog.last_stable_offset
        out = []
        for seg in closed:
            if seg.largest_timestamp > now - cfg.min_compaction_lag_ms:
                break  # min.compaction.lag.ms: this and later segments must wait
            if seg.next_offset > stable:
                break  # holds undecided transactional data (or data above the HW)
            st = os.stat(seg.log_path)
            out.append(SegmentFile(seg.base_offset, seg.log_path, seg.size,
                                   int(st.st_mtime * 1000), seg.largest_timestamp,
                                   seg.next_offset))
        return out

    def needs_cleaning(self, state: _LogState, segments: list[SegmentFile],
                       cfg: CleaningConfig, now: int) -> bool:
        total = sum(s.size for s in segments)
        if not total:
            return False
        dirty_segments = [s for s in segments if s.base_offset >= state.cleaned_upto]
        dirty = sum(s.size for s in dirty_segments)
        if dirty and dirty / total >= cfg.min_cleanable_ratio:
            return True
        # max.compaction.lag.ms: dirty data this old is cleaned whatever the ratio.
        if any(s.largest_timestamp <= now - cfg.max_compaction_lag_ms for s in dirty_segments):
            return True
        return state.tombstone_due_ms is not None and now >= state.tombstone_due_ms

    async def clean_log(self, topic: str, partition: int, plog: Any, force: bool = False) -> int:
        now = int(self._clock() * 1000)
        cfg = self.cleaning_config(topic, plog)
        segments = self._cleanable(plog, cfg, now)
        if not self._checkpoints_loaded:
            self._load_checkpoints()
        state = self._state.setdefault((topic, partition), _LogState())
        if not segments or not (force or self.needs_cleaning(state, segments, cfg, now)):
            return 0
        started = time.monotonic()
        aborted = aborted_ranges(plog.aborted_transactions(segments[0].base_offset,
                                                           segments[-1].end_offset))
        result = await asyncio.to_thread(clean_segments, plog.directory, segments, cfg, now,
                                         aborted)
        # Index entries first: one left behind by its removed marker misleads readers.
        fds = drop_obsolete_aborts(plog.segments, result.obsolete_aborts)
        if fds:
            await asyncio.to_thread(fsync_and_close, fds)
        swapped = 0
        for cleaned in result.segments:
            if swap_in_cleaned(plog, cleaned):
                swapped += 1
        if swapped:
            # Make the renames durable, off the event loop (one fsync for all of them).
            await asyncio.to_thread(_fsync_dir, plog.directory)
        last = segments[-1]
        state.cleaned_upto = last.base_offset + 1
        state.tombstone_due_ms = result.earliest_tombstone_ms
        self._save_checkpoint(plog.directory.parent)
        self.passes += 1
        log.info("cleaned %s-%d: %d segment(s) rewritten, %d -> %d records in %.0f ms", topic,
                 partition, swapped, result.records_before, result.records_after,
                 (time.monotonic() - started) * 1000)
        return swapped
