"""Idempotent-producer state of one partition: producer id -> epoch + its last 5 batches.

Rules (Kafka's ProducerStateManager / ProducerAppendInfo, idempotence only):
- a batch's epoch below the known epoch -> InvalidProducerEpoch;
- a higher epoch must start at sequence 0, else OutOfOrderSequenceNumber;
- a batch equal (first and last sequence) to one of the producer's last 5 batches
  is a duplicate: nothing is appended, the original's offsets are returned;
- otherwise the first sequence must follow the last one (wrapping at INT32_MAX
  to 0), else OutOfOrderSequenceNumber;
- an UNKNOWN producer id is accepted with any sequence, as Kafka >= 2.5 does:
  its state may have been removed with the segments retention deleted, and
  rejecting it would wedge a healthy producer.

Appends are staged (``begin`` -> ``ProducerAppend.check/record`` -> ``commit``)
so a request whose second batch fails leaves no trace of the first.

State is rebuilt on open from the newest snapshot (``<offset>.snapshot``, JSON,
named by the log end offset when taken) plus a scan of the batch headers after
it. Replay is idempotent (batches at or below a producer's last offset are
skipped), so a snapshot may safely cover a little more than its name says.

Not thread-safe: owned by its PartitionLog, used from the event loop thread.
"""
from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from rillet.protocol.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber
from rillet.records import INT32_MAX, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> "ProducerEntry":
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN), self.last_timestamp)

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        # Newest first: after retention forgot a producer, a retry may legitimately reuse a range.
        for meta in reversed(self.batches):
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def add(self, meta: BatchMetadata) -> None:
        self.batches.append(meta)
        self.last_timestamp = meta.timestamp


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppend:
    """Staged producer updates of one append; applied by ``commit``."""

    def __init__(self, manager: "ProducerStateManager") -> None:
        self._manager = manager
        self._updates: dict[int, ProducerEntry] = {}

    def _entry(self, producer_id: int) -> ProducerEntry | None:
        entry = self._updates.get(producer_id)
        return entry if entry is not None else self._manager.producers.get(producer_id)

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Raise on a fenced epoch or a sequence gap; return the original if a duplicate."""
        entry = self._entry(header.producer_id)
        if entry is None or header.is_control or header.base_sequence < 0:
            return None
        epoch = header.producer_epoch
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {header.producer_id} epoch {epoch} is older than the current {entry.epoch}")
        if epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceNumber(
                    f"producer {header.producer_id}: new epoch {epoch} must start at sequence 0, "
                    f"got {header.base_sequence}")
            return None
        duplicate = entry.find_duplicate(header.base_sequence, header.last_sequence)
        if duplicate is not None:
            return duplicate
        if entry.batches and not _in_sequence(entry.last_seq, header.base_sequence):
            raise OutOfOrderSequenceNumber(
                f"producer {header.producer_id} epoch {epoch}: expected sequence "
                f"{(entry.last_seq + 1) & INT32_MAX}, got {header.base_sequence}")
        return None

    def record(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Stage the batch (already checked) with the offsets it is being written at."""
        pid = header.producer_id
        entry = self._updates.get(pid)
        if entry is None:
            current = self._manager.producers.get(pid)
            entry = current.copy() if current is not None else ProducerEntry(pid, header.producer_epoch)
            self._updates[pid] = entry
        _apply(entry, header, first_offset, last_offset, timestamp)

    def commit(self) -> None:
        self._manager.producers.update(self._updates)
        self._updates = {}


def _apply(entry: ProducerEntry, header: BatchHeader, first_offset: int, last_offset: int,
           timestamp: int) -> None:
    if header.producer_epoch > entry.epoch:
        entry.epoch = header.producer_epoch
        entry.batches.clear()
    if header.is_control or header.base_sequence < 0:
        entry.last_timestamp = timestamp
        return
    entry.add(BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp))


class ProducerStateManager:
    """All producers of one partition, and their snapshots in the partition directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}

    def begin(self) -> ProducerAppend:
        return ProducerAppend(self)

    def replay(self, header: BatchHeader) -> None:
        """Rebuild from the log: apply a batch already in it, without checks, idempotently."""
        if header.producer_id < 0:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id, header.producer_epoch)
        elif header.producer_epoch < entry.epoch or header.last_offset <= entry.last_offset:
            return
        _apply(entry, header, header.base_offset, header.last_offset, header.max_timestamp)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than ``expiration_ms``; returns how many."""
        expired = [pid for pid, e in self.producers.items()
                   if e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def remove_before(self, log_start_offset: int) -> None:
        """Forget batches (and producers) that went with deleted segments; drop old snapshots."""
        for pid, entry in list(self.producers.items()):
            if 0 <= entry.last_offset < log_start_offset:
                del self.producers[pid]
            elif entry.batches and entry.batches[0].last_offset < log_start_offset:
                kept = [b for b in entry.batches if b.last_offset >= log_start_offset]
                entry.batches = deque(kept, maxlen=NUM_BATCHES_TO_RETAIN)
        offsets = self.snapshot_offsets()
        for offset in offsets[:-1]:
            if offset < log_start_offset:
                _unlink(self._snapshot_path(offset))

    # ------------------------------------------------------------ snapshots

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            try:
                offsets.append(int(path.name[: -len(SNAPSHOT_SUFFIX)]))
            except ValueError:
                continue
        return sorted(offsets)

    def take_snapshot(self, offset: int, keep: int = 3) -> None:
        """Write the state as of log end offset ``offset`` (tmp + rename; fsync comes with flush)."""
        producers = [
            [e.producer_id, e.epoch, e.last_timestamp,
             [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp] for b in e.batches]]
            for e in self.producers.values()
        ]
        path = self._snapshot_path(offset)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "offset": offset, "producers": producers}))
        os.replace(tmp, path)
        for old in self.snapshot_offsets()[:-keep]:
            _unlink(self._snapshot_path(old))

    def load_snapshot(self, max_offset: int) -> int:
        """Load the newest readable snapshot <= ``max_offset``; delete newer ones. Returns its offset or -1."""
        self.producers = {}
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > max_offset:
                _unlink(path)
                continue
            try:
                data = json.loads(path.read_text())
                self.producers = {
                    pid: ProducerEntry(pid, epoch, deque((BatchMetadata(*b) for b in batches),
                                                         maxlen=NUM_BATCHES_TO_RETAIN), last_ts)
                    for pid, epoch, last_ts, batches in data["producers"]
                }
                return offset
            except (OSError, ValueError, KeyError, TypeError):
                _unlink(path)  # torn by a crash: fall back to an older one
        return -1

    def truncate_to(self, offset: int) -> None:
        """The log lost everything >= offset: drop snapshots above it (caller reloads)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                _unlink(self._snapshot_path(snap))


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
