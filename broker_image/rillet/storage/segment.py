"""LogSegment: one ``<base_offset>.log`` data file plus its ``.index``, ``.timeindex`` and
(once a transaction aborts in it) ``.txnindex`` (txn_index.py).

The data file holds whole RecordBatch v2 batches back to back, exactly as they
were appended (offsets already assigned). Writes go to the end with one
os.write per append (page cache; fsync only in ``PartitionLog.flush`` via a
thread). Reads use the sparse offset index and os.pread of just the byte range
needed; a segment is never read into memory whole.

Recovery (``recover``) rescans the file with CRC checks, truncates it at the
first torn or invalid batch, and rebuilds both indexes. ``load`` is the cheap
path for segments already known to be flushed: check the indexes' shape and
verify only the tail after the last index entry.

Not thread-safe: owned by its PartitionLog and used only from the event loop
thread. The flush thread receives its own descriptors (dup() of the data file,
fresh ones for the indexes), so closing or deleting a segment while an fsync is
running is harmless. A segment keeps one descriptor open: its data file.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from rillet.records import (
    BATCH_HEADER_SIZE,
    CRC_START,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
)
from rillet.storage.index import OffsetIndex, TimeIndex
from rillet.storage.log_config import LogConfig
from rillet.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

from crc32c import crc32c

_BASE_AND_LENGTH = struct.Struct(">qi")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SCAN_CHUNK = 1 << 20
FIND_CHUNK = 64 * 1024


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def scan_batches(fd: int, start: int, end: int, *, verify: bool = False,
                 chunk: int = SCAN_CHUNK) -> Iterator[tuple[BatchHeader, memoryview | None]]:
    """Walk the batches of a log file from byte ``start`` to ``end``; stop at the first invalid one.

    Reads ``chunk`` bytes at a time (more for a batch larger than that), so a
    batch costs no syscall of its own. Invalid: a length below a header's
    (it would never advance), magic other than 2, a batch running past ``end``,
    or (``verify``) a CRC mismatch. ``verify`` reads every byte and yields each
    header with its batch's bytes (a view into the chunk); otherwise only
    headers are checked (about one header read per batch) and None comes with each.
    """
    pos = start
    buf = b""
    view = memoryview(buf)
    buf_start = pos
    unpack = HEADER_STRUCT.unpack_from
    while end - pos >= BATCH_HEADER_SIZE:
        off = pos - buf_start
        if off + BATCH_HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - pos), pos)
            view = memoryview(buf)
            buf_start, off = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                return
        fields = unpack(buf, off)
        length, magic = fields[1], fields[3]
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or magic != 2 or pos + size > end:
            return
        batch = None
        if verify:
            if off + size > len(buf):
                buf = os.pread(fd, max(min(chunk, end - pos), size), pos)
                view = memoryview(buf)
                buf_start, off = pos, 0
                if len(buf) < size:
                    return
            batch = view[off:off + size]
            if crc32c(batch[CRC_START:]) != fields[4]:
                return
        yield BatchHeader(pos, *fields), batch
        pos += size


class LogSegment:
    """One data file and its two indexes. See the module doc for the thread-safety contract."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_bytes: int = 10485760,
        now_ms: int = 0,
        suffix: str = "",
    ) -> None:
        """``suffix`` is appended to all three file names (the log cleaner writes ``.cleaned`` copies)."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        # Walks from an index entry cover at most an interval of batches: one read each.
        self._walk_chunk = min(FIND_CHUNK, index_interval_bytes + 4 * BATCH_HEADER_SIZE)
        self.log_path = directory / (segment_name(base_offset, LOG_SUFFIX) + suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(directory / (segment_name(base_offset, INDEX_SUFFIX) + suffix),
                                        base_offset, max_index_bytes)
        self.time_index = TimeIndex(directory / (segment_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
                                    base_offset, max_index_bytes)
        self.txn_index = TransactionIndex(
            directory / (segment_name(base_offset, TXN_INDEX_SUFFIX) + suffix))
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset  # last offset of the batch holding it
        self.first_batch_timestamp = -1
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self.dirty = False  # data written since the last fsync

    # ------------------------------------------------------------ state

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when empty (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    # ------------------------------------------------------------ append

    def append(self, block: memoryview, batches: list[tuple[int, int, int]]) -> None:
        """Write ``block`` (whole batches) at the end; ``batches`` = (last_offset, max_ts, size) each.

        On a failed write the file is cut back, so a partial batch never stays.
        """
        start = self.size
        try:
            view = block
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            os.ftruncate(self._fd, start)
            raise
        self.dirty = True
        position = start
        for last_offset, max_ts, size in batches:
            self._track_batch(last_offset, max_ts, size, position)
            position += size
        self.size = position

    def _track_batch(self, last_offset: int, max_ts: int, size: int, position: int) -> None:
        """Index bookkeeping for one batch at ``position`` (Kafka's rule: index every interval)."""
        if self.first_batch_timestamp < 0 and position == 0:
            self.first_batch_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last_offset + 1

    def seal(self) -> None:
        """The segment stops being active: index its max timestamp for retention and lookups."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.persist()
        self.time_index.persist()

    # ------------------------------------------------------------ scanning

    def scan(self, start: int = 0, *, verify: bool = False, chunk: int = SCAN_CHUNK) -> Iterator[BatchHeader]:
        """Yield headers from byte ``start`` until the end or the first invalid batch (see ``scan_batches``)."""
        for header, _ in scan_batches(self._fd, start, self.size, verify=verify, chunk=chunk):
            yield header

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Rescan with CRC checks, cut the torn tail, rebuild indexes. Returns bytes truncated.

        A batch whose base offset goes backwards (below the previous batch's next
        offset or the segment's base) also ends the valid prefix.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_stats()
        valid_end = 0
        expected = self.base_offset
        for header in self.scan(0, verify=True):
            if header.base_offset < expected:
                break
            self._track_batch(header.last_offset, header.max_timestamp, header.size, header.position)
            if on_batch is not None:
                on_batch(header)
            expected = header.next_offset
            valid_end = header.position + header.size
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
            self.dirty = True
        # Aborts whose marker went with the cut tail are gone too.
        self.txn_index.truncate_to(self.next_offset)
        return truncated

    def load(self) -> bool:
        """Cheap open for a segment below the recovery point. False: caller must ``recover``."""
        if not self.offset_index.load(self.size) or not self.time_index.load():
            return False
        self._reset_stats()
        last_offset, position = self.offset_index.last_entry
        end = position
        for header in self.scan(position, verify=True):
            # The last index entry must point at a batch holding exactly its offset.
            if position and header.position == position and header.last_offset != last_offset:
                return False
            self._track_batch(header.last_offset, header.max_timestamp, header.size, header.position)
            end = header.position + header.size
        if end != self.size or (self.size and self.next_offset <= last_offset):
            return False
        ts_entry, ts_offset = self.time_index.last_entry
        if ts_offset >= self.next_offset and len(self.time_index):
            return False
        if ts_entry > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts_entry, ts_offset
        if position:
            # The tail scan did not start at the first batch: read just its header.
            first = next(self.scan(0, chunk=BATCH_HEADER_SIZE), None)
            self.first_batch_timestamp = first.max_timestamp if first else -1
        return True

    def _reset_stats(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = -1
        self._bytes_since_index = 0

    # ------------------------------------------------------------ reads

    def find_batch(self, offset: int) -> BatchHeader | None:
        """Header of the first batch whose last offset >= ``offset`` (the one holding it)."""
        for header in self.scan(self.offset_index.lookup(offset), chunk=self._walk_chunk):
            if header.last_offset >= offset:
                return header
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool) -> bytes:
        """Whole batches from the one holding ``offset``, within max_bytes and below max_offset."""
        first = self.find_batch(offset)
        if first is None or (max_offset is not None and first.base_offset >= max_offset):
            return b""
        start = first.position
        want = min(max_bytes, self.size - start)
        if want < first.size:
            return self.read_at(start, first.size) if min_one_batch else b""
        data = os.pread(self._fd, want, start)
        end = 0
        while len(data) - end >= 12:
            base, length = _BASE_AND_LENGTH.unpack_from(data, end)
            if max_offset is not None and base >= max_offset:
                break
            if end + length + LOG_OVERHEAD > len(data):
                break
            end += length + LOG_OVERHEAD
        return data if end == len(data) else data[:end]

    def byte_range(self, offset: int, max_bytes: int, max_offset: int | None,
                   min_one_batch: bool) -> tuple[int, int]:
        """(position, length) of what ``read`` would return, from batch headers only (for
        sendfile). The end is found from the offset index, not by walking every batch up to
        it: a consumer's megabyte is some sixty batches, and their headers would be read
        through Python on every fetch, the very copy sendfile is there to avoid."""
        first = self.find_batch(offset)
        if first is None or (max_offset is not None and first.base_offset >= max_offset):
            return first.position if first else self.size, 0
        if first.size > max_bytes:
            return first.position, first.size if min_one_batch else 0
        limit = min(first.position + max_bytes, self._stop_position(max_offset))
        end = max(first.position, self.offset_index.position_floor(limit))
        # From that batch boundary, the whole batches still under the limit (fewer than
        # an index interval's worth): scan stops at the first one running past it.
        for header in self.scan_to(end, limit):
            end = header.position + header.size
        return first.position, end - first.position

    def _stop_position(self, max_offset: int | None) -> int:
        """Where the batches to leave out because of ``max_offset`` begin: the first batch
        whose base offset is at or past it (the file's end when none is)."""
        if max_offset is None or max_offset >= self.next_offset:
            return self.size
        holding = self.find_batch(max_offset)
        if holding is None:
            return self.size
        if holding.base_offset >= max_offset:
            return holding.position
        return holding.position + holding.size

    def scan_to(self, start: int, end: int) -> Iterator[BatchHeader]:
        """Headers of the whole batches from byte ``start`` that end by byte ``end``."""
        for header, _ in scan_batches(self._fd, start, min(end, self.size),
                                      chunk=self._walk_chunk):
            yield header

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def fileno(self) -> int:
        return self._fd

    # ------------------------------------------------------------ truncation, lifecycle

    def truncate_to(self, offset: int) -> int:
        """Drop batches whose last offset >= ``offset``; returns the new size in bytes."""
        header = self.find_batch(offset)
        if header is None:
            return self.size
        os.ftruncate(self._fd, header.position)
        self.size = header.position
        self.dirty = True
        self.recover()
        return self.size

    def dup_fds(self) -> list[int]:
        """Descriptors of the files changed since the last fsync, for the flush thread to fsync and close.

        Only changed files: with flush.messages=1 most appends add no index entry, and
        every fsync skipped is a disk round trip saved.
        """
        fds = [os.dup(self._fd)] if self.dirty else []
        for index in (self.offset_index, self.time_index):
            if index.dirty:
                fds.append(index.dup_fd())
        if self.txn_index.dirty:
            fd = self.txn_index.dup_fd()
            if fd is not None:
                fds.append(fd)
        return fds

    def take_dirty(self) -> tuple[list[int], tuple[bool, bool, bool, bool]]:
        """``dup_fds`` for a flush, clearing the dirty flags; also returns the flags for ``restore_dirty``."""
        flags = (self.dirty, self.offset_index.dirty, self.time_index.dirty, self.txn_index.dirty)
        if not any(flags):
            return [], flags
        fds = self.dup_fds()
        self.dirty = self.offset_index.dirty = self.time_index.dirty = False
        self.txn_index.dirty = False
        return fds, flags

    def restore_dirty(self, flags: tuple[bool, bool, bool, bool]) -> None:
        """The fsync of what ``take_dirty`` handed out failed: those files still need one."""
        data, offsets, times, aborts = flags
        self.dirty = self.dirty or data
        self.offset_index.dirty = self.offset_index.dirty or offsets
        self.time_index.dirty = self.time_index.dirty or times
        self.txn_index.dirty = self.txn_index.dirty or aborts

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        self.txn_index.delete()


def new_segment(directory: Path, config: LogConfig, base: int, now_ms: int) -> LogSegment:
    """A segment object at `base` with the topic's index settings (its files open lazily)."""
    return LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes,
                      max_index_bytes=config.segment_index_bytes, now_ms=now_ms)
