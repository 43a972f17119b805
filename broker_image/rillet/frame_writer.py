"""Writing one response frame to a connection: bytes, or a SplicedFrame with sendfile.

A SplicedFrame (protocol/file_records.py) goes out in wire order: the framing bytes through
the stream, each large file range with os.sendfile, the kernel copying the range from the
page cache to the socket, so record bytes never pass through Python. A range goes straight
to the socket once the stream has nothing unsent before it (it waits for that in drain(),
see _drain_empty); what the socket does not take at once is left to ``loop.sendfile``. Small
ranges are copied into the bytes around them (SENDFILE_MIN_BYTES). On a TLS connection the
kernel cannot encrypt, so the frame is materialised (pread) and written as bytes: the same
bytes either way. The frame's descriptors are closed once it has been written or has failed.
"""
from __future__ import annotations

import asyncio
import os

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
    transport_socket = writer.get_extra_info("socket")
    sock = transport_socket.fileno() if transport_socket is not None else -1
    pending: list[bytes] = []
    for part in frame.parts:
        if isinstance(part, bytes):
            pending.append(part)
        elif part.length < SENDFILE_MIN_BYTES:
            pending.append(part.read())
        else:
            writer.write(b"".join(pending))
            pending.clear()
            await _sendfile(loop, writer, sock, part)
    writer.write(b"".join(pending))


async def _sendfile(loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, sock: int,
                    part: FileRange) -> None:
    """One range, after what was written before it (``sock``: the transport's socket
    descriptor, -1 if it has none). Once the transport holds nothing unsent, the range goes
    straight to the socket, as much as it takes now; only what is left waits in
    ``loop.sendfile`` (which pauses reading around the send: some ten syscalls and several
    loop turns per range, paid for every partition of a consumer's fetch if taken each
    time)."""
    if writer.transport.is_closing():   # loop.sendfile raises RuntimeError on it
        raise ConnectionResetError("connection closed while a response was sent")
    if writer.transport.get_write_buffer_size():
        await _drain_empty(writer)
        if writer.transport.is_closing():   # a lost connection ends drain() without an error
            raise ConnectionResetError("connection closed while a response was sent")
    sent = _send_now(sock, part) if sock >= 0 else 0
    if sent < part.length:
        sent += await loop.sendfile(writer.transport, part.file, part.position + sent,
                                    part.length - sent)
    if sent != part.length:
        raise ShortFile(f"{part.file.name}: sent {sent} of {part.length} bytes at "
                        f"{part.position}")


async def _drain_empty(writer: asyncio.StreamWriter) -> None:
    """Wait until the transport has sent all it holds. loop.sendfile would wait so itself,
    but Python 3.11 leaves the transport broken when the task is cancelled in that wait
    (the idle sweep cancels a connection whose peer stopped reading): drain() is cancelled
    cleanly, and with the limits at 0 it waits for the buffer to empty."""
    transport = writer.transport
    low, high = transport.get_write_buffer_limits()
    transport.set_write_buffer_limits(high=0)
    try:
        await writer.drain()
    finally:
        if not transport.is_closing():
            transport.set_write_buffer_limits(high=high, low=low)


def _send_now(sock: int, part: FileRange) -> int:
    """Bytes of ``part`` the non-blocking socket ``sock`` takes without waiting. Raises
    ShortFile at the file's end before the range's (the file was truncated)."""
    sent = 0
    source = part.file.fileno()
    while sent < part.length:
        try:
            n = os.sendfile(sock, source, part.position + sent, part.length - sent)
        except BlockingIOError:
            break
        if n == 0:
            raise ShortFile(f"{part.file.name}: sent {sent} of {part.length} bytes at "
                            f"{part.position}")
        sent += n
    return sent
