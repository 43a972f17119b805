"""Opening a partition's log directory after a clean or an unclean stop (Kafka's LogLoader).

What loading decides, in order:
1. Leftovers of interrupted operations (``.swap``, ``.cleaned``, ``.deleted``, ``.tmp``) and
   indexes whose ``.log`` is gone are deleted.
2. Segments wholly below the recovery point are opened cheaply (index shape + CRC of the tail
   after the last index entry); the segment holding it and every later one are rescanned by
   CRC, torn tails cut and indexes rebuilt. After damage, later segments are deleted: their
   offsets no longer follow on.
3. The producer state is the newest snapshot plus every producer batch after it, replayed in
   log order while the segments load (recovery reads those headers anyway); a replayed
   ABORT marker (re-)adds its aborted-index entry (storage/transactions.py), and a recovered
   segment's ``.txnindex`` loses the entries of markers cut with its tail; the leader-epoch
   cache is cut to the log's bounds.
4. The high watermark is the checkpointed one, within the log's bounds: a replica must not
   expose as leader what was never replicated.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from rillet.records import BatchHeader
from rillet.storage.leader_epoch import LeaderEpochCache
from rillet.storage.log_config import NEVER, LogConfig
from rillet.storage.offset_files import (HIGH_WATERMARK_NAME, LOG_START_NAME,
                                         RECOVERY_POINT_NAME, read_offset_file)
from rillet.storage.producer_state import ProducerStateManager
from rillet.storage.segment import (INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment,
                                    new_segment)
from rillet.storage.transactions import replay_batch
from rillet.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

STRAY_SUFFIXES = (".swap", ".cleaned", ".deleted", ".tmp")


@dataclass
class LoadedLog:
    """What a partition log starts from."""

    segments: list[LogSegment]       # oldest first, never empty
    log_start_offset: int
    recovery_point: int              # everything below is on disk
    high_watermark: int
    checkpointed_high_watermark: int | None
    dir_dirty: bool                  # a file was created the directory's fsync must cover


def replay_producers(producer_state: ProducerStateManager, segment: LogSegment,
                     start: int) -> None:
    """Replay the producer batches of a loaded segment from offset ``start`` on."""
    if segment.next_offset <= start:
        return
    for header in segment.scan(segment.offset_index.lookup(start)):
        if header.producer_id >= 0 and header.last_offset >= start:
            replay_batch(producer_state, segment, header)


def rebuild_producer_state(producer_state: ProducerStateManager, segments: list[LogSegment],
                           log_start_offset: int) -> None:
    """The producer state from the newest usable snapshot and the batches after it."""
    leo = segments[-1].next_offset
    snapshot = producer_state.load_snapshot(leo)
    start = max(snapshot, log_start_offset)
    for segment in segments:
        replay_producers(producer_state, segment, start)
    producer_state.remove_before(log_start_offset)


class LogLoader:
    """Loads one partition directory into a `LoadedLog`; fills in the producer state and
    the epoch cache it is given."""

    def __init__(self, directory: Path, config: LogConfig, producer_state: ProducerStateManager,
                 epochs: LeaderEpochCache, now_ms: int) -> None:
        self.directory = directory
        self.config = config
        self.producer_state = producer_state
        self.epochs = epochs
        self.now_ms = now_ms
        self._snapshot_offset = 0

    def load(self) -> LoadedLog:
        bases = self._clean_directory()
        recovery_point = read_offset_file(self.directory, RECOVERY_POINT_NAME) or 0
        self.epochs.load()
        self._snapshot_offset = max(0, self.producer_state.load_snapshot(NEVER))
        segments, consistent = self._load_segments(bases, recovery_point)
        dir_dirty = not segments
        if not segments:
            segments.append(new_segment(self.directory, self.config, 0, self.now_ms))
        log_start = segments[0].base_offset
        leo = segments[-1].next_offset
        recorded = read_offset_file(self.directory, LOG_START_NAME)
        if recorded is not None and log_start < recorded <= leo:
            log_start = recorded   # DeleteRecords moved it inside a segment
        self.epochs.truncate_from_end(leo)
        self.epochs.truncate_from_start(log_start)
        if not consistent or self._snapshot_offset > leo:
            # The snapshot or a replayed batch is past the log end.
            rebuild_producer_state(self.producer_state, segments, log_start)
        else:
            self.producer_state.remove_before(log_start)
        checkpoint = read_offset_file(self.directory, HIGH_WATERMARK_NAME)
        # Without a checkpoint (killed before the log's first one, which comes up to
        # replica.high.watermark.checkpoint.interval.ms after its first move) the log start,
        # as Kafka: never above what the ISR held. A leader moves it up again at once from
        # what the ISR is known to hold (a single node: its log end), a follower from the
        # leader's answer; the log end could show a follower's uncommitted records.
        high_watermark = log_start if checkpoint is None else min(max(checkpoint, log_start), leo)
        return LoadedLog(segments, log_start, min(recovery_point, leo), high_watermark,
                         checkpoint, dir_dirty)

    def _load_segments(self, bases: list[int],
                       recovery_point: int) -> tuple[list[LogSegment], bool]:
        """The segments that still follow on from each other; False when a batch was
        replayed into the producer state from a segment then dropped."""
        segments: list[LogSegment] = []
        consistent = True
        for i, base in enumerate(bases):
            segment = new_segment(self.directory, self.config, base, self.now_ms)
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            # A segment holding offsets at or past the recovery point may have holes after a
            # power loss and is rescanned; the active one too, unless a flush covered all of it
            # (clean shutdown), which the cheap load's own tail scan then proves.
            if next_base is None:
                loaded = segment.load() and segment.next_offset <= recovery_point
            else:
                loaded = next_base <= recovery_point and segment.load()
            if loaded:
                replay_producers(self.producer_state, segment, self._snapshot_offset)
            damaged = False if loaded else self._recover_segment(segment)
            if segments and segment.base_offset < segments[-1].next_offset:
                damaged = True  # overlaps its predecessor: only a crash leaves that
                consistent = False  # its batches were replayed into the producer state
                segment.delete()
            else:
                segments.append(segment)
            if damaged and next_base is not None:
                self._delete_segments(bases[i + 1:])
                break
        return segments, consistent

    def _clean_directory(self) -> list[int]:
        """Delete leftovers of interrupted operations; return the base offsets of the .log files."""
        bases: set[int] = set()
        index_files = []
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith(STRAY_SUFFIXES):
                path.unlink(missing_ok=True)
            elif name.endswith(LOG_SUFFIX):
                try:
                    bases.add(int(name[: -len(LOG_SUFFIX)]))
                except ValueError:
                    log.warning("ignoring unexpected file %s", path)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                index_files.append(path)
        for path in index_files:
            stem = path.name.split(".")[0]
            if not stem.isdigit() or int(stem) not in bases:
                path.unlink(missing_ok=True)  # its .log was deleted (retention interrupted)
        return sorted(bases)

    def _recover_segment(self, segment: LogSegment) -> bool:
        """Rescan one segment by CRC; True if data had to be cut (later segments are suspect)."""
        truncated = segment.recover(lambda header: self._on_recovered_batch(segment, header))
        segment.dirty = True  # what recovery found may not be fsynced yet
        if truncated:
            log.warning("%s: truncated %d torn/invalid bytes at position %d",
                        segment.log_path, truncated, segment.size)
        return truncated > 0

    def _on_recovered_batch(self, segment: LogSegment, header: BatchHeader) -> None:
        self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        if header.producer_id >= 0 and header.last_offset >= self._snapshot_offset:
            replay_batch(self.producer_state, segment, header)

    def _delete_segments(self, bases: list[int]) -> None:
        for base in bases:
            log.warning("%s: deleting segment %d after a damaged one", self.directory, base)
            new_segment(self.directory, self.config, base, self.now_ms).delete()
