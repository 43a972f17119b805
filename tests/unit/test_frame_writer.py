"""write_frame cancelled while the answer waits on a peer that reads nothing (what the idle
sweep does to such a connection): the transport stays whole, so dropping it afterwards ends
cleanly, with nothing for asyncio to report. Real sockets on loopback."""
from __future__ import annotations

import asyncio
import io
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from rillet.frame_writer import write_frame
from rillet.protocol.file_records import FileRange, SplicedFrame

RANGE = 8 << 20   # more than a socket takes while its peer reads nothing


async def _steps(n: int = 20) -> None:
    """Let the loop run ``n`` rounds of ready callbacks (no clock involved)."""
    for _ in range(n):
        await asyncio.sleep(0)


# Where the answer waits: behind bytes of an earlier answer in the transport; behind its own
# first bytes, which a full socket left there; or in asyncio's sendfile, after the socket took
# the start of the range.
WAITS = ["bytes-buffered", "socket-full", "range-started"]


@pytest.mark.parametrize("wait", WAITS)
def test_a_cancelled_sendfile_leaves_the_transport_whole(tmp_path: Path, wait: str) -> None:
    records = tmp_path / "records"
    records.write_bytes(b"r" * RANGE)
    buffered = wait == "bytes-buffered"

    async def scenario() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: errors.append(context))
        accepted: asyncio.Future[asyncio.StreamWriter] = loop.create_future()

        async def on_connect(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(writer)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        peer = socket.socket()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        peer.setblocking(False)
        await loop.sock_connect(peer, server.sockets[0].getsockname())
        writer = await accepted
        try:
            # The peer reads nothing. Either bytes of an earlier answer wait in the transport,
            # or the socket alone is full and the frame's own first bytes wait there: the
            # range's sendfile must wait for them to leave first.
            writer.transport.set_write_buffer_limits(high=64 << 20)
            writer.write(b"x" * (16 << 20) if buffered else b"")
            if wait == "socket-full":
                fd = writer.get_extra_info("socket").fileno()
                try:
                    while True:
                        os.write(fd, b"x" * 65536)
                except BlockingIOError:
                    pass
            assert (writer.transport.get_write_buffer_size() > 0) == buffered
            head = [] if wait == "range-started" else [b"head"]
            frame = SplicedFrame(parts=[*head, FileRange(io.FileIO(records), 0, RANGE)],
                                 size=4 * len(head) + RANGE)
            task = asyncio.create_task(write_frame(writer, frame, sendfile=True))
            await _steps()
            assert not task.done(), "the answer did not wait on the peer"
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Whole: reading again (sendfile pauses it), its buffer empty or as it was.
            assert writer.transport.is_reading() and not writer.transport.is_closing()
            writer.transport.abort()
            await _steps()
            assert writer.transport.is_closing()
        finally:
            peer.close()
            server.close()
            await server.wait_closed()
        return errors

    errors = asyncio.run(scenario())
    assert errors == [], [str(e.get("exception") or e.get("message")) for e in errors]
