"""Loopback TCP proxies for tests, and the thread and socket bookkeeping they share.

`ProxyServer` owns a listener, the threads serving it and every socket they open, so
`close()` can end all of them within a bound (shutdown wakes a thread blocked in accept,
recv or send; close alone does not). Subclasses say what one accepted connection does.

`LinkProxy` forwards bytes to one target and can be cut and healed, like a network link:
- "refuse": existing connections are reset and new ones are accepted and reset at once,
  so the peer sees the failure immediately.
- "blackhole": nothing is forwarded and nothing closed; bytes wait (in the kernel's buffers
  and at most one chunk per direction here) until the link heals, as TCP holds them through
  a real partition. A new connection is accepted but not carried on to the target until the
  link heals, so the peer's requests time out.

A LinkProxy given a `tap` calls it with (connection label, bytes) for every chunk it carries
toward its target, just before sending it on: how the fuzz corpus records controller traffic
(tests/fuzz/capture/controller.py). Without one it forwards exactly as before.
"""
from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from enum import Enum
from typing import Any, Callable


CHUNK = 65536
CONNECT_TIMEOUT = 5.0
# What a LinkProxy's tap is called with: the connection's label ("<link name>#<n>") and the
# bytes about to go toward the target.
Tap = Callable[[str, bytes], None]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes; ConnectionError (an OSError) when the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        buf += chunk
    return bytes(buf)


def shut(*socks: socket.socket) -> None:
    """Shut down and close, quietly: shutdown is what wakes another thread blocked on it."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass


def reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN: the peer gets ECONNRESET, not a quiet EOF."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


class ProxyServer:
    """A loopback listener whose threads and sockets all end in close().

    Not a public server: one thread accepts, each connection gets its own threads
    (started with _spawn), and every socket it opens is registered (_track)."""

    def __init__(self, target_host: str, target_port: int, port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        # Port 0 by default: the kernel's choice, bound at once, so no other test can take it.
        self._listener = socket.create_server(("127.0.0.1", port or 0))
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop, name=f"proxy-accept-{self.port}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def threads(self) -> list[threading.Thread]:
        """The threads of this proxy still running."""
        with self._lock:
            return [t for t in self._threads if t.is_alive()]

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection and join every thread; raises when a thread
        is still alive after `timeout` seconds."""
        self._closed.set()
        self._on_close()
        shut(self._listener)
        self._drop_connections()
        deadline = time.monotonic() + timeout
        # Again until none is left: a connection accepted just as close() began may have
        # started its thread after the first look.
        while (left := self.threads()) and time.monotonic() < deadline:
            for thread in left:
                thread.join(max(0.0, deadline - time.monotonic()))
        if left:
            raise RuntimeError(f"proxy {self.port}: threads still running after close: "
                               f"{[t.name for t in left]}")

    def _on_close(self) -> None:
        """Hook: wake whatever a subclass's threads wait on besides sockets."""

    def _serve(self, client: socket.socket) -> None:
        raise NotImplementedError

    def _spawn(self, target: Callable[..., None], *args: Any, name: str = "proxy") -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _track(self, *socks: socket.socket) -> bool:
        """Register sockets for close(); False (and they are shut) when already closing."""
        with self._lock:
            if not self._closed.is_set():
                self._sockets.update(socks)
                return True
        shut(*socks)
        return False

    def _untrack(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(socks)
        shut(*socks)

    def _drop_connections(self) -> None:
        with self._lock:
            socks, self._sockets = list(self._sockets), set()
        shut(*socks)

    def _connect_upstream(self) -> socket.socket | None:
        try:
            return socket.create_connection(self.target, timeout=CONNECT_TIMEOUT)
        except OSError:
            return None

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._track(client):
                self._spawn(self._serve_tracked, client, name=f"proxy-conn-{self.port}")

    def _serve_tracked(self, client: socket.socket) -> None:
        try:
            self._serve(client)
        finally:
            self._untrack(client)


class LinkMode(str, Enum):
    OPEN = "open"
    REFUSE = "refuse"
    BLACKHOLE = "blackhole"


class LinkProxy(ProxyServer):
    """A proxy that forwards bytes to one target until cut; see the module docstring."""

    def __init__(self, target_host: str, target_port: int, port: int | None = None,
                 name: str = "", tap: Tap | None = None) -> None:
        self.name = name or f"->{target_host}:{target_port}"
        self._tap = tap
        self._connection_numbers = itertools.count(1)
        self._gate = threading.Condition()
        self._mode = LinkMode.OPEN
        # Bumped by every refuse cut: a connection admitted before it may not carry another
        # byte, even one it read in the instant before the cut dropped its sockets.
        self._generation = 0
        super().__init__(target_host, target_port, port)

    @property
    def mode(self) -> LinkMode:
        return self._mode

    def cut(self, mode: str | LinkMode = LinkMode.REFUSE) -> None:
        mode = LinkMode(mode)
        if mode is LinkMode.OPEN:
            raise ValueError("cut mode is refuse or blackhole")
        with self._gate:
            self._mode = mode
            if mode is LinkMode.REFUSE:
                self._generation += 1
            self._gate.notify_all()
        if mode is LinkMode.REFUSE:
            self._drop_connections()

    def heal(self) -> None:
        with self._gate:
            self._mode = LinkMode.OPEN
            self._gate.notify_all()

    def _on_close(self) -> None:
        with self._gate:
            self._gate.notify_all()

    def _admit(self, generation: int | None) -> int | None:
        """Wait while blackholed; the generation to carry on with, or None to drop.

        generation None: a new connection, admitted into the current generation."""
        with self._gate:
            while self._mode is LinkMode.BLACKHOLE and not self.closed:
                self._gate.wait()
            if self.closed or self._mode is LinkMode.REFUSE:
                return None
            if generation is not None and generation != self._generation:
                return None
            return self._generation

    def _serve(self, client: socket.socket) -> None:
        generation = self._admit(None)
        upstream = self._connect_upstream() if generation is not None else None
        if upstream is None or not self._track(upstream):
            reset(client)
            return
        upstream.settimeout(None)
        label = f"{self.name}#{next(self._connection_numbers)}"
        try:
            self._spawn(self._pump, upstream, client, generation,
                        name=f"proxy-pump-{self.port}")
            self._pump(client, upstream, generation, label)
        finally:
            self._untrack(upstream)

    def _pump(self, src: socket.socket, dst: socket.socket, generation: int,
              tap_label: str | None = None) -> None:
        """Copy src to dst; `tap_label` (toward the target only) names the bytes to the tap."""
        try:
            while True:
                data = src.recv(CHUNK)
                if not data or self._admit(generation) is None:
                    break
                if tap_label is not None and self._tap is not None:
                    self._tap(tap_label, data)
                dst.sendall(data)
        except OSError:
            pass
        # Either side ending ends both, as a dropped link would: no half-open leftovers.
        shut(src, dst)
