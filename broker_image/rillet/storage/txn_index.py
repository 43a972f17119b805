"""The aborted-transactions index of one segment (Kafka's ``.txnindex``).

One entry per transaction aborted by an ABORT marker written in this segment: the producer
id, the transaction's first offset, its last offset (the marker's) and the partition's last
stable offset when it was aborted. A read_committed Fetch returns the entries overlapping
the range it reads, so the consumer can drop the aborted batches.

File format is Kafka's: 34-byte entries back to back, each ``version int16 (0),
producer_id int64, first_offset int64, last_offset int64, last_stable_offset int64``.
Entries are appended in marker order, so they are sorted by ``last_offset``.

The entries are also held in memory: aborts are rare, so a segment's list is short, and a
read_committed fetch then never reads the file. Writes are one small ``os.write`` through a
descriptor opened for it (no descriptor is kept per segment); the fsync comes with the
segment's flush (``dirty``). A torn last entry (a crash mid-write) is ignored on load, and
an entry lost with it is re-added when the log loader replays the marker.

Not thread-safe: owned by its LogSegment, used from the event loop thread.
"""
from __future__ import annotations

import os
import struct
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from rillet.records import BatchHeader

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of a segment's transaction index (Kafka's .txnindex entry)."""
    producer_id: int
    first_offset: int
    last_offset: int          # the ABORT marker's offset
    last_stable_offset: int   # the partition's LSO right after the abort


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(ENTRY.pack(VERSION, e.producer_id, e.first_offset, e.last_offset,
                               e.last_stable_offset) for e in entries)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of ``data``; a torn tail and entries of unknown versions are skipped."""
    out = []
    for pos in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version == VERSION:
            out.append(AbortedTxn(pid, first, last, lso))
    return out


def overlapping(entries: list[AbortedTxn], fetch_offset: int,
                upper_offset: int) -> tuple[list[AbortedTxn], bool]:
    """The entries of transactions that hold offsets in [fetch_offset, upper_offset), and
    whether the search is complete: an entry's LSO at abort reached ``upper_offset``, so
    every transaction open below it had ended by then and later entries cannot overlap
    (Kafka's collectAbortedTxns)."""
    start = bisect_left([e.last_offset for e in entries], fetch_offset)
    found = []
    for entry in entries[start:]:
        if entry.first_offset < upper_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_offset:
            return found, True
    return found, False


# producer id -> (first offset, marker offset) of each of its aborted transactions.
AbortedRanges = dict[int, list[tuple[int, int]]]


def aborted_ranges(entries: list[AbortedTxn]) -> AbortedRanges:
    ranges: AbortedRanges = {}
    for entry in entries:
        ranges.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
    return ranges


def is_aborted(header: BatchHeader, aborted: AbortedRanges) -> bool:
    """A data batch of an aborted transaction (its records were never committed)."""
    if not header.is_transactional or header.is_control:
        return False
    return any(first <= header.base_offset <= last
               for first, last in aborted.get(header.producer_id, ()))


class TransactionIndex:
    """The aborted transactions of one segment: in memory, appended to its file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dirty = False
        try:
            self.entries = decode_entries(path.read_bytes())
        except FileNotFoundError:
            self.entries = []

    def add(self, entry: AbortedTxn) -> None:
        """Append, unless the same abort is already there (replays add entries again)."""
        # One marker per offset, appended in offset order: anything at or below the last
        # entry is a replay of an abort already indexed.
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            return
        self._write(encode_entries([entry]), truncate=False)
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (their batches are gone)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._write(encode_entries(kept), truncate=True)

    def drop(self, aborts: set[tuple[int, int]]) -> bool:
        """Drop the entries of these (producer id, marker offset) aborts (the cleaner removed
        their records); True when the file was rewritten."""
        kept = [e for e in self.entries if (e.producer_id, e.last_offset) not in aborts]
        if len(kept) == len(self.entries):
            return False
        self.entries = kept
        self._write(encode_entries(kept), truncate=True)
        return True

    def collect(self, fetch_offset: int, upper_offset: int) -> tuple[list[AbortedTxn], bool]:
        return overlapping(self.entries, fetch_offset, upper_offset)

    def _write(self, data: bytes, *, truncate: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
        fd = os.open(self.path, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        self.dirty = True

    def dup_fd(self) -> int | None:
        """A descriptor for an fsync (the caller closes it); None when there is no file."""
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self.entries = []
