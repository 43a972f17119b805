"""A tiny blocking Kafka wire client for tests: any API, any version, raw frames too."""
from __future__ import annotations

import socket
import struct
from typing import Any

from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_request, request_schema
from tests.tcp_proxy import recv_exact


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 receive_buffer: int | None = None) -> None:
        """``receive_buffer``: SO_RCVBUF, set before connecting (the window it offers)."""
        host, port = bootstrap.rsplit(":", 1)
        if receive_buffer is None:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect((host, int(port)))
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        return recv_exact(self.sock, size)

    def request(self, api_key: int, version: int, body: dict[str, Any] | Any,
                expect_response: bool = True) -> Any:
        self.correlation += 1
        if isinstance(body, dict):
            body = build(request_schema(api_key, version), body)
        self.send_raw(encode_request(api_key, version, self.correlation, "wire-test", body))
        if not expect_response:
            return None
        corr, resp = decode_response(api_key, version, self.recv_frame())
        assert corr == self.correlation
        return resp

    def request_frame(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        """Send a hand-built request (header and body, no size prefix); (correlation, body)."""
        self.send_raw(struct.pack(">i", len(frame)) + frame)
        return decode_response(api_key, version, self.recv_frame())

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


# --- hand-built flexible frames (KIP-482 tagged fields) -----------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    """A tagged-field section: count, then tag, size and bytes of each, by tag."""
    fields = fields or {}
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(value)) + value for tag, value in sorted(fields.items()))


def compact_string(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def compact_bytes(raw: bytes) -> bytes:
    return uvarint(len(raw) + 1) + raw


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def request_header_v2(api_key: int, version: int, correlation_id: int,
                      header_tags: dict[int, bytes] | None = None,
                      client_id: str = "wire-test") -> bytes:
    """Request header v2; client_id stays a legacy int16 string, as in Kafka."""
    raw = client_id.encode()
    return (struct.pack(">hhih", api_key, version, correlation_id, len(raw)) + raw
            + tags(header_tags))
