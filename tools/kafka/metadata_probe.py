#!/usr/bin/env python3
"""Wait until a Kafka-protocol broker answers a Metadata request listing at least one broker.

Used by tools/kafka/kafka-server (readiness of the comparison Kafka node) and by bench/compare.py
(time from process start to first successful metadata request, for Kafka and rillet alike).
Stdlib only, so it runs before any venv exists. It speaks one request by hand: Metadata v4
(non-flexible; Kafka 4.x removed v0-v3, rillet serves 0-12) asking for no topics.

    python3 tools/kafka/metadata_probe.py 127.0.0.1:9092 [timeout_seconds]
"""
from __future__ import annotations

import socket
import struct
import sys
import time

_METADATA_KEY = 3
_METADATA_VERSION = 4
_CLIENT_ID = b"rillet-probe"


def _metadata_request(correlation_id: int) -> bytes:
    header = struct.pack(">hhih", _METADATA_KEY, _METADATA_VERSION, correlation_id, len(_CLIENT_ID))
    # topics: empty array (not null) so the broker does no auto-creation and lists no topics;
    # allow_auto_topic_creation: false.
    body = struct.pack(">ib", 0, 0)
    payload = header + _CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def metadata_broker_count(host: str, port: int, timeout: float = 2.0) -> int:
    """One Metadata v4 round trip; returns how many brokers the answer lists.

    Raises OSError/ConnectionError when the port does not answer or closes the connection.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(_metadata_request(correlation_id=7))
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        body = _read_exact(sock, size)
    correlation_id, _throttle_ms, brokers = struct.unpack_from(">iii", body, 0)
    if correlation_id != 7:
        raise ConnectionError(f"correlation id {correlation_id} != 7")
    return brokers


def wait_ready(bootstrap: str, timeout: float, interval: float = 0.02) -> float:
    """Poll until Metadata lists a broker; returns the monotonic time it first did.

    Raises TimeoutError after `timeout` seconds.
    """
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if metadata_broker_count(host, int(port)) >= 1:
                return time.monotonic()
        except (OSError, ConnectionError, struct.error) as exc:
            last_error = exc
        time.sleep(interval)
    raise TimeoutError(f"{bootstrap}: no metadata answer within {timeout}s (last: {last_error})")


def main(argv: list[str]) -> int:
    bootstrap = argv[1]
    timeout = float(argv[2]) if len(argv) > 2 else 60.0
    start = time.monotonic()
    try:
        ready = wait_ready(bootstrap, timeout)
    except TimeoutError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{bootstrap} ready after {ready - start:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
