"""Writing one response frame to a connection: bytes, or a SplicedFrame with sendfile.

A SplicedFrame (protocol/file_records.py) goes out part by part in wire order: framing bytes
through the stream, each file range with ``loop.sendfile``, which waits until the bytes
written before it have left, then has the kernel copy the range from the page cache to the
socket (os.sendfile), so record bytes never pass through Python. On a TLS connection the
kernel cannot encrypt, so the frame is materialised (pread) and written as bytes: the same
bytes either way. The frame's descriptors are closed when it has been written or failed.
"""
from __future__ import annotations

import asyncio

from .protocol.file_records import FileRange, ShortFile, SplicedFrame

# Below this many file bytes a frame is copied and written at once: a sendfile per range
# costs more syscalls (and packets) than copying a few kilobytes.
SENDFILE_MIN_BYTES = 16 * 1024


async def write_frame(writer: asyncio.StreamWriter, frame: bytes | SplicedFrame, *,
                      sendfile: bool) -> None:
    """Write ``frame`` and drain. ``sendfile``: the transport is a plain socket. Raises
    ShortFile when a file was truncated under the frame (the connection must be closed: its
    stream can no longer be completed), ConnectionError when the peer went away."""
    if isinstance(frame, bytes):
        writer.write(frame)
    elif not sendfile or frame.size - _framing_bytes(frame) < SENDFILE_MIN_BYTES:
        writer.write(frame.materialise())
    else:
        try:
            await _send_parts(writer, frame)
        finally:
            frame.close()
    await writer.drain()


def _framing_bytes(frame: SplicedFrame) -> int:
    return sum(len(p) for p in frame.parts if isinstance(p, bytes))


async def _send_parts(writer: asyncio.StreamWriter, frame: SplicedFrame) -> None:
    loop = asyncio.get_running_loop()
    for part in frame.parts:
        if not isinstance(part, FileRange):
            writer.write(part)
            continue
        if writer.transport.is_closing():   # loop.sendfile raises RuntimeError on it
            raise ConnectionResetError("connection closed while a response was sent")
        sent = await loop.sendfile(writer.transport, part.file, part.position, part.length)
        if sent != part.length:
            raise ShortFile(f"{part.file.name}: sent {sent} of {part.length} bytes at "
                            f"{part.position}")
