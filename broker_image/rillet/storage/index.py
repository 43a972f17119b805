"""Sparse per-segment indexes: offset -> file position, and timestamp -> offset.

The entries live in compact in-memory arrays that lookups binary-search. New
entries (one per index.interval.bytes of log data) are buffered and written to
the file when it matters: at flush (before the fsync), when the segment is
sealed or closed, on truncation. No descriptor stays open, so a segment costs
one file descriptor (its .log), not three.

Indexes are never trusted blindly after a crash: ``load`` checks the file's
shape and returns False when the caller must rebuild it from the log (the log
is the truth, indexes are derived data, as in Kafka). Entries lost in a crash
only mean a rebuild or a longer scan, never wrong data.

Entry formats (big endian):
- ``.index``:     int32 relative offset, int32 file position        (8 bytes)
- ``.timeindex``: int64 timestamp,       int32 relative offset      (12 bytes)

Offsets in the offset index are the LAST offset of the indexed batch, mapped to
the batch's start position: the batch holding any offset X starts at or after
the position of the largest entry <= X.

Not thread-safe: owned by one LogSegment, used from the event loop thread; the
flush thread only fsyncs a descriptor handed to it by ``dup_fd``.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    """File handling shared by both indexes: buffered appends, rewrite on truncation."""

    ENTRY_SIZE = 0

    def __init__(self, path: Path, max_index_bytes: int) -> None:
        self.path = path
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._pending = bytearray()
        self.dirty = False  # changed since the last fsync
        if not path.exists():
            path.touch()

    def _read_file(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def persist(self) -> None:
        """Write buffered entries to the file (page cache)."""
        if not self._pending:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _write_all(fd, self._pending)
        finally:
            os.close(fd)
        self._pending.clear()

    def _rewrite(self, data: bytes) -> None:
        """Replace the file's content (truncation, reset): rare, so simply rewrite it."""
        self._pending.clear()
        self.dirty = True
        if not data and not _file_size(self.path):
            return  # already empty: skip the syscalls (recovery resets every index it rebuilds)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def dup_fd(self) -> int:
        """A descriptor of the (persisted) file for an fsync; the caller closes it."""
        self.persist()
        return os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        self.persist()


class OffsetIndex(_IndexFile):
    """Sparse map from (last) offset of a batch to the byte position where the batch starts."""

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int = 10485760) -> None:
        super().__init__(path, max_index_bytes)
        self.base_offset = base_offset
        self._relative = array("i")
        self._positions = array("i")

    def __len__(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return len(self._relative) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, (base_offset, 0) if empty."""
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._positions[-1]

    def load(self, log_size: int) -> bool:
        """Read the file; False if its shape is invalid (caller rebuilds)."""
        data = self._read_file()
        if len(data) % self.ENTRY_SIZE:
            return False
        relative = array("i")
        positions = array("i")
        prev_rel, prev_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size or rel < 0:
                return False
            relative.append(rel)
            positions.append(pos)
            prev_rel, prev_pos = rel, pos
        self._relative, self._positions = relative, positions
        return True

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._relative and (rel <= self._relative[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entries must increase: {offset}@{position} after {self.last_entry}")
        self._pending += _OFFSET_ENTRY.pack(rel, position)
        self._relative.append(rel)
        self._positions.append(position)
        self.dirty = True

    def lookup(self, offset: int) -> int:
        """Position to start scanning from for ``offset`` (largest entry <= offset)."""
        i = bisect_right(self._relative, offset - self.base_offset)
        return self._positions[i - 1] if i else 0

    def position_floor(self, position: int) -> int:
        """The largest indexed position <= ``position`` (0 if none): a batch starts there,
        so a walk of batch headers toward ``position`` may start there."""
        i = bisect_right(self._positions, position)
        return self._positions[i - 1] if i else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset``."""
        self._truncate_entries(bisect_left(self._relative, offset - self.base_offset))

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (log truncated there)."""
        self._truncate_entries(bisect_left(self._positions, position))

    def _truncate_entries(self, keep: int) -> None:
        if keep == len(self._relative):
            return
        del self._relative[keep:]
        del self._positions[keep:]
        self._rewrite(b"".join(_OFFSET_ENTRY.pack(r, p) for r, p in zip(self._relative, self._positions)))

    def reset(self) -> None:
        """Empty the index, file included (also when a failed load left garbage in it)."""
        self._relative = array("i")
        self._positions = array("i")
        self._rewrite(b"")


class TimeIndex(_IndexFile):
    """Sparse map of (max timestamp so far, offset of the batch holding it), increasing."""

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int = 10485760) -> None:
        super().__init__(path, max_index_bytes)
        self.base_offset = base_offset
        self._timestamps = array("q")
        self._relative = array("i")

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, (-1, base_offset) if empty."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative[-1]

    def load(self) -> bool:
        """Read the file; False if its shape is invalid (caller rebuilds)."""
        data = self._read_file()
        if len(data) % self.ENTRY_SIZE:
            return False
        timestamps = array("q")
        relative = array("i")
        prev_ts, prev_rel = -(2**63), -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if ts <= prev_ts or rel < prev_rel or rel < 0:
                return False
            timestamps.append(ts)
            relative.append(rel)
            prev_ts, prev_rel = ts, rel
        self._timestamps, self._relative = timestamps, relative
        return True

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append only when the timestamp grows (entries stay strictly increasing)."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        rel = offset - self.base_offset
        self._pending += _TIME_ENTRY.pack(timestamp, rel)
        self._timestamps.append(timestamp)
        self._relative.append(rel)
        self.dirty = True

    def lookup_before(self, timestamp: int) -> int:
        """Offset to start searching for the first record with ts >= ``timestamp``.

        Uses the largest entry with a timestamp strictly below the target: every
        record up to that entry's batch is older than the target, so the answer
        lies after it. Returns base_offset when no entry qualifies.
        """
        i = bisect_left(self._timestamps, timestamp)
        return self.base_offset + self._relative[i - 1] if i else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset``."""
        rel = offset - self.base_offset
        keep = len(self._relative)
        while keep and self._relative[keep - 1] >= rel:
            keep -= 1
        if keep == len(self._relative):
            return
        del self._timestamps[keep:]
        del self._relative[keep:]
        self._rewrite(b"".join(_TIME_ENTRY.pack(t, r) for t, r in zip(self._timestamps, self._relative)))

    def reset(self) -> None:
        """Empty the index, file included (also when a failed load left garbage in it)."""
        self._timestamps = array("q")
        self._relative = array("i")
        self._rewrite(b"")


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
