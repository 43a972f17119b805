"""A tiny blocking Kafka wire client for tests: any API, any version, raw frames too."""
from __future__ import annotations

import socket
import struct
from typing import Any

from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_request, request_schema
from tests.tcp_proxy import recv_exact


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
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

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
