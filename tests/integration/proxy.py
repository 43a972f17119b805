"""A loopback TCP proxy that can cut connections after forwarding a request.

Used to make real producers retry: the broker has appended the batch, the
response never arrives, the client resends the same batch.
"""
from __future__ import annotations

import socket
import struct
import threading

from tests.harness import free_port


class DroppingProxy:
    def __init__(self, target_host: str, target_port: int, drop_every: int,
                 api_key: int = 0, max_drops: int = 5, port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.drop_every = drop_every
        self.api_key = api_key
        self.max_drops = max_drops
        self.seen = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump_requests, args=(client, upstream),
                             daemon=True).start()
            threading.Thread(target=self._pump_raw, args=(upstream, client),
                             daemon=True).start()

    def _should_drop(self, frame: bytes) -> bool:
        if len(frame) < 2 or struct.unpack_from(">h", frame)[0] != self.api_key:
            return False
        with self._lock:
            self.seen += 1
            if self.dropped < self.max_drops and self.seen % self.drop_every == 0:
                self.dropped += 1
                return True
        return False

    def _pump_requests(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                head = _recv_exact(src, 4)
                frame = _recv_exact(src, struct.unpack(">i", head)[0])
                dst.sendall(head + frame)
                if self._should_drop(frame):
                    # Give the broker time to append, then lose the response.
                    threading.Event().wait(0.3)
                    break
        except OSError:
            pass
        _close(src, dst)

    def _pump_raw(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        _close(src, dst)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return bytes(buf)
