"""How many bytes a TCP peer has acknowledged (Linux's TCP_INFO), to tell a peer that reads
its answer slowly from one that has stopped reading it.

A response the peer does not read fills the socket's send buffer, and its write waits; it
waits as long for a slow link. The count of bytes the peer's kernel acknowledged moves on for
the slow link and stops for the stalled peer (its receive window is shut), which is what
Kafka's selector tells apart by whether the channel is ever writable again.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

# struct tcp_info (linux/tcp.h): tcpi_bytes_acked, a u64, since Linux 4.1.
_BYTES_ACKED = struct.Struct("=Q")
_BYTES_ACKED_AT = 120
_INFO_SIZE = _BYTES_ACKED_AT + _BYTES_ACKED.size


def bytes_acked(sock: Any) -> int | None:
    """Bytes the peer has acknowledged on ``sock`` (a socket or asyncio's TransportSocket),
    or None where the kernel does not say (not Linux, a closed socket)."""
    option = getattr(socket, "TCP_INFO", None)
    if sock is None or option is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, _INFO_SIZE)
    except OSError:
        return None
    if len(info) < _INFO_SIZE:
        return None
    return _BYTES_ACKED.unpack_from(info, _BYTES_ACKED_AT)[0]
