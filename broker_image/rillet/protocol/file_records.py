"""Record bytes that stay in segment files until the response goes out (zero-copy Fetch).

A Fetch handler puts a ``FileRecords`` in a partition's records field in place of bytes: the
byte ranges of segment files holding the batches, each on a descriptor of its own. kio's
writer frames the response as usual: of a records value it asks only ``len()`` (for the
length prefix, int32 before v12, a compact varint from v12) and hands the value to the
buffer's ``write``. ``SplicedBuffer`` keeps such a value as a part of its own instead of
bytes, so the encoded response becomes a ``SplicedFrame``: header and framing bytes and file
ranges in wire order, its size known before a byte is sent. kio stays the one definition of
the layout for every version; nothing here knows a Fetch field.

A plaintext connection sends the ranges with sendfile (frame_writer.py); everything else
(TLS, an Envelope, tests) ``materialise``s the frame with pread: the same bytes, copied.

Descriptors: each range holds a dup() of its segment's descriptor, taken when the handler
read the log. The segment may be rolled, deleted by retention or replaced by the cleaner
while the response waits or is being sent: its inode stays readable through this descriptor
until the frame is closed (the owner of a FileRecords closes it: the handler for a read it
discards, else the frame that took it). A dup shares the segment's file offset, which
sendfile moves; harmless, as segments append with O_APPEND and read with pread. A file
truncated under a queued response (a follower cutting its log) and still shorter than the
range when it is sent sends short: that is ``ShortFile``, and the connection is closed, as
Kafka does, since its frame can no longer be completed. What is not detected: a file cut and
then appended past the range again before the send reads the new bytes (whole batches with
their own CRCs, at offsets the reader's next fetch checks), the same exposure Kafka's
FileRecords has; nothing here compares contents.
"""
from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

_SIZE = struct.Struct(">i")


class ShortFile(Exception):
    """A file range held fewer bytes than its frame promised (the file was truncated)."""


@dataclass(frozen=True, slots=True)
class FileRange:
    """``length`` bytes at ``position`` of ``file`` (its own descriptor, see the module doc)."""
    file: io.FileIO
    position: int
    length: int

    def read(self) -> bytes:
        data = os.pread(self.file.fileno(), self.length, self.position)
        if len(data) != self.length:
            raise ShortFile(f"{self.file.name}: {len(data)} of {self.length} bytes at "
                            f"{self.position}")
        return data


class FileRecords:
    """A records field's value kept in files: ``len()`` is the bytes it stands for.

    Deliberately not bytes: written to anything but a ``SplicedBuffer`` it raises TypeError,
    rather than framing a length with no bytes behind it."""
    __slots__ = ("ranges", "size")

    def __init__(self, ranges: tuple[FileRange, ...]) -> None:
        self.ranges = ranges
        self.size = sum(r.length for r in ranges)

    @classmethod
    def pin(cls, slices: Iterable[tuple[int, int, int]]) -> FileRecords:
        """Hold (fd, position, length) slices a log returned, on descriptors of their own.
        The slices' descriptors belong to their segments and need only be open now."""
        ranges = []
        try:
            for fd, position, length in slices:
                ranges.append(FileRange(io.FileIO(os.dup(fd), "rb", closefd=True),
                                        position, length))
        except BaseException:
            for r in ranges:
                r.file.close()
            raise
        return cls(tuple(ranges))

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords({self.size} bytes in {len(self.ranges)} range(s))"

    def read(self) -> bytes:
        """The bytes, copied (ShortFile if a file lost some)."""
        return b"".join(r.read() for r in self.ranges)

    def close(self) -> None:
        for r in self.ranges:
            r.file.close()


Part = bytes | FileRange


@dataclass(slots=True)
class SplicedFrame:
    """A size-prefixed response frame as bytes and file ranges in wire order. Owns the
    ranges' descriptors: ``close`` (or ``materialise``) releases them."""
    parts: list[Part]
    size: int   # the whole frame, size prefix included

    def materialise(self) -> bytes:
        """The frame's bytes, copied from the files; closes the frame."""
        try:
            return b"".join(p if isinstance(p, bytes) else p.read() for p in self.parts)
        finally:
            self.close()

    def close(self) -> None:
        for p in self.parts:
            if isinstance(p, FileRange):
                p.file.close()


class SplicedBuffer:
    """The ``Writable`` kio's writers write a response into: bytes are gathered, a
    FileRecords becomes a part of the frame."""

    def __init__(self) -> None:
        self._chunks: list[bytearray | FileRange] = []
        self._held: list[FileRecords] = []
        self._chunk = bytearray(4)   # the size prefix, filled in by ``frame``
        self._size = 4

    def write(self, data: bytes | bytearray | memoryview | FileRecords) -> int:
        if isinstance(data, FileRecords):
            self._held.append(data)
            if data.ranges:
                self._chunks.append(self._chunk)
                self._chunks.extend(data.ranges)
                self._chunk = bytearray()
            self._size += data.size
            return data.size
        self._chunk += data
        self._size += len(data)
        return len(data)

    def frame(self) -> SplicedFrame:
        """The frame written so far, its size prefix filled in; the frame now owns the
        FileRecords written into it."""
        if self._chunk:
            self._chunks.append(self._chunk)
        first = self._chunks[0]
        assert isinstance(first, bytearray)
        first[:4] = _SIZE.pack(self._size - 4)
        parts = [bytes(c) if isinstance(c, bytearray) else c for c in self._chunks]
        return SplicedFrame(parts, self._size)

    def close(self) -> None:
        """Release what was written (the encoding failed: no frame will own it)."""
        for held in self._held:
            held.close()
