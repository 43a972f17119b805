"""How far a TCP peer has taken what was sent to it (Linux's TCP_INFO), to tell a peer that
reads its answer slowly from one that has stopped reading it.

A response the peer does not read fills the socket's send buffer, and its write waits; it
waits as long for a slow link. The count of bytes the peer's kernel acknowledged moves on for
the slow link and stops for the stalled peer (its receive window is shut, the bytes queue
unsent), which is what Kafka's selector tells apart by whether the channel is ever writable
again. A count that stops with nothing queued is not the peer's doing: the sender had
nothing more to give it.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

# Fields of struct tcp_info (linux/tcp.h) at their offsets, the same on every architecture:
# tcpi_unacked (u32, segments in flight), tcpi_bytes_acked (u64, Linux 4.1) and
# tcpi_notsent_bytes (u32, Linux 4.6).
_UNACKED = (struct.Struct("=I"), 24)
_BYTES_ACKED = (struct.Struct("=Q"), 120)
_NOTSENT = (struct.Struct("=I"), 144)
_INFO_SIZE = 148


@dataclass(frozen=True)
class SendProgress:
    acked: int      # bytes the peer has acknowledged since the connection opened
    waiting: bool   # bytes sent and not acknowledged, or queued and not sent


def send_progress(sock: Any) -> SendProgress | None:
    """What the peer has taken of what ``sock`` (a socket or asyncio's TransportSocket) sent,
    or None where the kernel does not say (not Linux, Linux before 4.6, a closed socket)."""
    option = getattr(socket, "TCP_INFO", None)
    if sock is None or option is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, _INFO_SIZE)
    except OSError:
        return None
    if len(info) < _INFO_SIZE:
        return None

    def field(spec: tuple[struct.Struct, int]) -> int:
        return spec[0].unpack_from(info, spec[1])[0]

    return SendProgress(acked=field(_BYTES_ACKED),
                        waiting=field(_UNACKED) > 0 or field(_NOTSENT) > 0)
