"""Writing one response frame to a connection: bytes, or a SplicedFrame with sendfile.

A SplicedFrame (protocol/file_records.py) goes out in wire order: the framing bytes through
the stream, each large file range with ``loop.sendfile``, which waits until the bytes written
before it have left, then has the kernel copy the range from the page cache to the socket
(os.sendfile), so record bytes never pass through Python. Small ranges are copied into the
bytes around them (SENDFILE_MIN_BYTES). On a TLS connection the kernel cannot encrypt, so
the frame is materialised (pread) and written as bytes: the same bytes either way. The
frame's descriptors are closed once it has been written or has failed.
"""
from __future__ import annotations

import asyncio

from .protocol.file_records import FileRange, ShortFile, SplicedFrame

# A file range shorter than this is copied into the bytes around it instead: a sendfile
# costs some ten syscalls through asyncio (pause and resume reading, fstat, lseek, ...),
# more than copying a few kilobytes, and a run of small ranges (a follower's fetch of many
# quiet partitions) then leaves in one write rather than one sendfile each.
SENDFILE_MIN_BYTES = 32 * 1024


async def write_frame(writer: asyncio.StreamWriter, frame: bytes | SplicedFrame, *,
                      sendfile: bool) -> None:
    """Write ``frame`` and drain. ``sendfile``: the transport is a plain socket. Raises
    ShortFile when a file was truncated under the frame (the connection must be closed: its
    stream can no longer be completed), ConnectionError when the peer went away."""
    if isinstance(frame, bytes):
        writer.write(frame)
    elif not sendfile:
        writer.write(frame.materialise())
    else:
        try:
            await _send_parts(writer, frame)
        finally:
            frame.close()
    await writer.drain()


async def _send_parts(writer: asyncio.StreamWriter, frame: SplicedFrame) -> None:
    """The frame's parts in order: large file ranges with sendfile, everything between them
    (framing, small ranges copied) in one write each."""
    loop = asyncio.get_running_loop()
    pending: list[bytes] = []
    for part in frame.parts:
        if isinstance(part, bytes):
            pending.append(part)
        elif part.length < SENDFILE_MIN_BYTES:
            pending.append(part.read())
        else:
            writer.write(b"".join(pending))
            pending.clear()
            await _sendfile(loop, writer, part)
    writer.write(b"".join(pending))


async def _sendfile(loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter,
                    part: FileRange) -> None:
    """One range, after what was written before it (loop.sendfile waits for that)."""
    if writer.transport.is_closing():   # loop.sendfile raises RuntimeError on it
        raise ConnectionResetError("connection closed while a response was sent")
    sent = await loop.sendfile(writer.transport, part.file, part.position, part.length)
    if sent != part.length:
        raise ShortFile(f"{part.file.name}: sent {sent} of {part.length} bytes at "
                        f"{part.position}")
