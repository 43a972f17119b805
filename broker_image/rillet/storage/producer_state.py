"""Producer state of one partition: producer id -> epoch, its last 5 batches, and the first
offset of its ongoing transaction.

Rules of idempotence (Kafka's ProducerStateManager / ProducerAppendInfo):
- a batch's epoch below the known epoch -> InvalidProducerEpoch;
- a higher epoch must start at sequence 0, else OutOfOrderSequenceNumber;
- a batch equal (first and last sequence) to one of the producer's last 5 batches
  is a duplicate: nothing is appended, the original's offsets are returned;
- otherwise the first sequence must follow the last one (wrapping at INT32_MAX
  to 0), else OutOfOrderSequenceNumber;
- an UNKNOWN producer id is accepted with any sequence, as Kafka >= 2.5 does:
  its state may have been removed with the segments retention deleted, and
  rejecting it would wedge a healthy producer.

Transactions (Kafka's ProducerAppendInfo, KIP-98): a producer's first transactional batch
opens its transaction at that batch's base offset; a COMMIT or ABORT marker (a control
batch, txn_marker.py) closes it and yields a CompletedTxn, which the log turns into an
aborted-index entry when it aborted. A plain batch while a transaction is open is
InvalidTxnState; a marker from an older producer epoch InvalidProducerEpoch, from an older
coordinator epoch TransactionCoordinatorFenced. Producers with an open transaction are
never expired nor dropped with deleted segments: their first offset holds the last stable
offset (LSO) back. A transaction whose marker is written but not yet below the high
watermark still holds the LSO (``unreplicated``), so while this process runs a marker a
new leader may lack is never read past. Known gap (Kafka has it too): after a restart,
``unreplicated`` is rebuilt only from markers after the snapshot's offset, so a marker
before it but not yet below the high watermark no longer holds the LSO.

KIP-890 verification (txn/verification.py): a transactional batch of a producer with no
transaction ongoing here is appended only after the transaction coordinator confirmed the
partition is in its transaction; ``verification_guard`` is taken before that question and
a marker for the producer drops it, so an answer that raced the end of the transaction is
not used (``guard_holds`` is False).

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

from rillet.protocol.errors import (InvalidProducerEpoch, InvalidTxnState,
                                    OutOfOrderSequenceNumber, TransactionCoordinatorFenced)
from rillet.records import INT32_MAX, BatchHeader
from rillet.txn_marker import TxnMarker

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(slots=True)
class BatchMetadata:
    """One of the last batches of a producer: its sequence and offset range."""
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended in this partition."""
    producer_id: int
    first_offset: int
    last_offset: int      # the marker's offset
    is_aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    """What a partition keeps of one producer: epoch, last batches, open transaction."""
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1   # -1: no transaction open
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> "ProducerEntry":
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN), self.last_timestamp,
                             self.current_txn_first_offset, self.coordinator_epoch)

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


_Batch = tuple[BatchHeader, int, int, int, TxnMarker | None]   # header, offsets, time, marker


class ProducerAppend:
    """Staged producer updates of one append; applied by ``commit``.

    The first batch recorded is only kept, and applied to the live entry at commit: the
    common append (Kafka's clients send one batch per partition) copies no entry. Once a
    second batch is checked, the first is staged on a copy like every later one, so each
    batch is checked against the batches before it in the same append.
    """

    __slots__ = ("_manager", "_first", "_updates", "_completed", "_marked")

    def __init__(self, manager: "ProducerStateManager") -> None:
        self._manager = manager
        self._first: _Batch | None = None   # the only batch so far, not applied yet
        self._updates: dict[int, ProducerEntry] = {}
        self._completed: list[CompletedTxn] = []
        self._marked: set[int] = set()   # producers a staged marker ends a transaction of

    def _entry(self, producer_id: int) -> ProducerEntry | None:
        if self._first is not None:
            self._stage(*self._first)
            self._first = None
        entry = self._updates.get(producer_id)
        return entry if entry is not None else self._manager.producers.get(producer_id)

    def check(self, header: BatchHeader, marker: TxnMarker | None = None) -> BatchMetadata | None:
        """Raise on a fenced epoch, a sequence gap or a plain batch inside a transaction;
        return the original if a duplicate. ``marker``: what a control batch carries."""
        entry = self._entry(header.producer_id)
        if entry is None:
            return None
        if header.is_control:
            if marker is not None:
                _check_marker(entry, marker)
            return None
        if header.base_sequence < 0:
            return None
        epoch = header.producer_epoch
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {header.producer_id} epoch {epoch} is older than the current {entry.epoch}")
        if (not header.is_transactional and entry.current_txn_first_offset >= 0
                and epoch == entry.epoch):
            raise InvalidTxnState(
                f"producer {header.producer_id} sent a non-transactional batch while its "
                f"transaction from offset {entry.current_txn_first_offset} is open")
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

    def record(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int,
               marker: TxnMarker | None = None) -> None:
        """Stage the batch (already checked) with the offsets it is being written at."""
        if self._first is None and not self._updates:
            self._first = (header, first_offset, last_offset, timestamp, marker)
            return
        if self._first is not None:
            self._stage(*self._first)
            self._first = None
        self._stage(header, first_offset, last_offset, timestamp, marker)

    def _stage(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int,
               marker: TxnMarker | None) -> None:
        pid = header.producer_id
        entry = self._updates.get(pid)
        if entry is None:
            current = self._manager.producers.get(pid)
            entry = current.copy() if current is not None else ProducerEntry(pid, header.producer_epoch)
            self._updates[pid] = entry
        completed = _apply(entry, header, first_offset, last_offset, timestamp, marker)
        if completed is not None:
            self._completed.append(completed)
        if marker is not None:
            self._marked.add(pid)

    def commit(self) -> list[CompletedTxn]:
        """Apply the staged updates; returns the transactions the staged markers ended."""
        manager = self._manager
        if self._first is not None:
            return self._commit_first(*self._first)
        manager.producers.update(self._updates)
        for entry in self._updates.values():
            manager.track_ongoing(entry)
        for pid in self._marked:
            manager.verification_guards.pop(pid, None)
        self._marked = set()
        completed, self._completed, self._updates = self._completed, [], {}
        manager.unreplicated.extend(completed)
        return completed

    def _commit_first(self, header: BatchHeader, first_offset: int, last_offset: int,
                      timestamp: int, marker: TxnMarker | None) -> list[CompletedTxn]:
        """The one batch of this append, applied to the live entry (no append awaits, so
        nothing saw the entry between its check and now)."""
        self._first = None
        manager = self._manager
        pid = header.producer_id
        entry = manager.producers.get(pid)
        if entry is None:
            entry = manager.producers[pid] = ProducerEntry(pid, header.producer_epoch)
        completed = _apply(entry, header, first_offset, last_offset, timestamp, marker)
        manager.track_ongoing(entry)
        if marker is not None:
            manager.verification_guards.pop(pid, None)
        if completed is None:
            return []
        manager.unreplicated.append(completed)
        return [completed]


def _check_marker(entry: ProducerEntry, marker: TxnMarker) -> None:
    if marker.producer_epoch < entry.epoch:
        raise InvalidProducerEpoch(
            f"marker for producer {entry.producer_id} has epoch {marker.producer_epoch}, "
            f"older than the current {entry.epoch}")
    if 0 <= marker.coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFenced(
            f"marker for producer {entry.producer_id} from coordinator epoch "
            f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}")


def _apply(entry: ProducerEntry, header: BatchHeader, first_offset: int, last_offset: int,
           timestamp: int, marker: TxnMarker | None = None) -> CompletedTxn | None:
    if header.producer_epoch > entry.epoch:
        entry.epoch = header.producer_epoch
        entry.batches.clear()
    if header.is_control:
        entry.last_timestamp = timestamp
        if marker is None:
            return None
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        first, entry.current_txn_first_offset = entry.current_txn_first_offset, -1
        if first < 0:
            return None   # no transaction open here: the marker ends nothing
        return CompletedTxn(entry.producer_id, first, first_offset, not marker.commit)
    if header.is_transactional and entry.current_txn_first_offset < 0:
        entry.current_txn_first_offset = first_offset
    if header.base_sequence < 0:
        entry.last_timestamp = timestamp
        return None
    entry.add(BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp))
    return None


class ProducerStateManager:
    """All producers of one partition, and their snapshots in the partition directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction (the LSO is their minimum).
        self.ongoing: dict[int, int] = {}
        # Ended transactions whose marker is not yet below the high watermark.
        self.unreplicated: list[CompletedTxn] = []
        # producer id -> token of a KIP-890 verification in flight (see the module doc).
        self.verification_guards: dict[int, object] = {}

    def needs_verification(self, producer_id: int, epoch: int) -> bool:
        """Whether a transactional batch of this producer would start a transaction here."""
        entry = self.producers.get(producer_id)
        return entry is None or entry.epoch != epoch or entry.current_txn_first_offset < 0

    def verification_guard(self, producer_id: int) -> object:
        return self.verification_guards.setdefault(producer_id, object())

    def guard_holds(self, producer_id: int, guard: object) -> bool:
        return self.verification_guards.get(producer_id) is guard

    def begin(self) -> ProducerAppend:
        return ProducerAppend(self)

    def track_ongoing(self, entry: ProducerEntry) -> None:
        if entry.current_txn_first_offset >= 0:
            self.ongoing[entry.producer_id] = entry.current_txn_first_offset
        else:
            self.ongoing.pop(entry.producer_id, None)

    def _reset_ongoing(self) -> None:
        self.ongoing = {}
        self.unreplicated = []
        for entry in self.producers.values():
            self.track_ongoing(entry)

    def clear(self) -> None:
        """Forget every producer (the log was emptied)."""
        self.producers = {}
        self.verification_guards = {}
        self._reset_ongoing()

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction not known to be decided on every
        replica: an open one, or one whose marker is not yet below ``high_watermark``."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]
        elif not self.ongoing:
            return None   # the common case, on every fetch: no transactions at all
        firsts = [*self.ongoing.values(), *(t.first_offset for t in self.unreplicated)]
        return min(firsts) if firsts else None

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an abort: the oldest other open transaction's first offset,
        else the offset after the marker (Kafka's lastStableOffset(completedTxn))."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def replay(self, header: BatchHeader, marker: TxnMarker | None = None) -> CompletedTxn | None:
        """Rebuild from the log: apply a batch already in it, without checks, idempotently;
        returns the transaction a replayed marker ended."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id, header.producer_epoch)
        elif header.producer_epoch < entry.epoch or header.last_offset <= entry.last_offset:
            return None
        elif header.is_control and not 0 <= entry.current_txn_first_offset <= header.base_offset:
            marker = None   # an old marker replayed again: it ends nothing now
        completed = _apply(entry, header, header.base_offset, header.last_offset,
                           header.max_timestamp, marker)
        self.track_ongoing(entry)
        if completed is not None:
            self.unreplicated.append(completed)
        return completed

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than ``expiration_ms``; returns how many."""
        # An open transaction is never forgotten: it holds the LSO until its marker comes.
        expired = [pid for pid, e in self.producers.items()
                   if e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms
                   and e.current_txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def remove_before(self, log_start_offset: int) -> None:
        """Forget batches (and producers) that went with deleted segments; drop old snapshots."""
        for pid, entry in list(self.producers.items()):
            if 0 <= entry.last_offset < log_start_offset and entry.current_txn_first_offset < 0:
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
             [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp] for b in e.batches],
             e.current_txn_first_offset, e.coordinator_epoch]
            for e in self.producers.values()
        ]
        path = self._snapshot_path(offset)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 2, "offset": offset, "producers": producers}))
        os.replace(tmp, path)
        for old in self.snapshot_offsets()[:-keep]:
            _unlink(self._snapshot_path(old))

    def load_snapshot(self, max_offset: int) -> int:
        """Load the newest readable snapshot <= ``max_offset``; delete newer ones. Returns its offset or -1."""
        self.producers = {}
        self._reset_ongoing()
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > max_offset:
                _unlink(path)
                continue
            try:
                data = json.loads(path.read_text())
                self.producers = {row[0]: _entry_from_row(row) for row in data["producers"]}
                self._reset_ongoing()
                return offset
            except (OSError, ValueError, KeyError, TypeError):
                _unlink(path)  # torn by a crash: fall back to an older one
        return -1

    def truncate_to(self, offset: int) -> None:
        """The log lost everything >= offset: drop snapshots above it (caller reloads)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                _unlink(self._snapshot_path(snap))


def _entry_from_row(row: list) -> ProducerEntry:
    """A snapshot row: version 1 has no transaction fields (none open, as it predates them)."""
    pid, epoch, last_ts, batches, *txn = row
    first, coordinator_epoch = txn if txn else (-1, -1)
    return ProducerEntry(pid, epoch, deque((BatchMetadata(*b) for b in batches),
                                           maxlen=NUM_BATCHES_TO_RETAIN), last_ts,
                         first, coordinator_epoch)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
