"""Sparse per-segment indexes: offset -> file position, and timestamp -> offset.

Both are plain files appended to with one small os.write per entry (every
index.interval.bytes of log data), mirrored in compact in-memory arrays that
lookups binary-search. They are never trusted blindly after a crash: ``load``
checks the file's shape and returns False when the caller must rebuild it
from the log (the log is the truth, indexes are derived data, as in Kafka).

Entry formats (big endian):
- ``.index``:     int32 relative offset, int32 file position        (8 bytes)
- ``.timeindex``: int64 timestamp,       int32 relative offset      (12 bytes)

Offsets in the offset index are the LAST offset of the indexed batch, mapped to
the batch's start position: the batch holding any offset X starts at or after
the position of the largest entry <= X.

Not thread-safe: owned by one LogSegment, used from the event loop thread; the
flush thread only fsyncs a dup() of the file descriptor.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _open_append(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)


class OffsetIndex:
    """Sparse map from (last) offset of a batch to the byte position where the batch starts."""

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int = 10485760) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._relative = array("i")
        self._positions = array("i")
        self._fd = _open_append(path)
        self.dirty = False

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
        data = _read_all(self._fd)
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
        _write_all(self._fd, _OFFSET_ENTRY.pack(rel, position))
        self._relative.append(rel)
        self._positions.append(position)
        self.dirty = True

    def lookup(self, offset: int) -> int:
        """Position to start scanning from for ``offset`` (largest entry <= offset)."""
        i = bisect_right(self._relative, offset - self.base_offset)
        return self._positions[i - 1] if i else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset``."""
        keep = bisect_left(self._relative, offset - self.base_offset)
        self._truncate_entries(keep)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (log truncated there)."""
        keep = bisect_left(self._positions, position)
        self._truncate_entries(keep)

    def _truncate_entries(self, keep: int) -> None:
        if keep == len(self._relative):
            return
        del self._relative[keep:]
        del self._positions[keep:]
        os.ftruncate(self._fd, keep * self.ENTRY_SIZE)
        self.dirty = True

    def reset(self) -> None:
        """Empty the index, file included (also when a failed load left garbage in it)."""
        self._relative = array("i")
        self._positions = array("i")
        _truncate_file(self._fd)
        self.dirty = True

    def dup_fd(self) -> int:
        return os.dup(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class TimeIndex:
    """Sparse map of (max timestamp so far, offset of the batch holding it), increasing."""

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int = 10485760) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._timestamps = array("q")
        self._relative = array("i")
        self._fd = _open_append(path)
        self.dirty = False

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
        data = _read_all(self._fd)
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
        _write_all(self._fd, _TIME_ENTRY.pack(timestamp, rel))
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
        os.ftruncate(self._fd, keep * self.ENTRY_SIZE)
        self.dirty = True

    def reset(self) -> None:
        """Empty the index, file included (also when a failed load left garbage in it)."""
        self._timestamps = array("q")
        self._relative = array("i")
        _truncate_file(self._fd)
        self.dirty = True

    def dup_fd(self) -> int:
        return os.dup(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _truncate_file(fd: int) -> None:
    # ftruncate costs ~1 ms on some filesystems even when nothing changes; skip it then.
    if os.fstat(fd).st_size:
        os.ftruncate(fd, 0)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
