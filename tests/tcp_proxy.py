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

The state of a link lives in a `Link`, one direction of it: LinkProxy uses one Link both
ways; the per-node gates of addressed clusters (tests/node_gate.py) use one per direction
of each pair of nodes, so a link can also be cut one way (a connection is only set up while
both ways are open, as a TCP handshake needs) or slowed (`Link.slow`: every chunk that way
is held that long; chunks are sent in order, so a slow link also caps throughput).

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

    def __init__(self, target_host: str, target_port: int, port: int | None = None,
                 host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        # Port 0 by default: the kernel's choice, bound at once, so no other test can take it.
        self._listener = socket.create_server((host, port or 0))
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop, name=f"proxy-accept-{self.port}")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

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


class Link:
    """One direction of a network link, shared by every proxied connection whose bytes go
    that way: open, refused or blackholed, and how long each chunk is delayed.

    A connection is admitted only while both its directions are open (a TCP handshake needs
    packets both ways); once admitted, each direction's bytes obey their own Link, so a
    one-way cut holds a->b bytes while b->a bytes still flow on established connections."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._gate = threading.Condition()
        self._mode = LinkMode.OPEN
        self._delay = 0.0
        # Bumped by every refuse cut: a connection admitted before it may not carry another
        # byte, even one it read in the instant before the cut dropped its sockets.
        self._generation = 0
        self._carried: set[socket.socket] = set()

    @property
    def mode(self) -> LinkMode:
        return self._mode

    @property
    def delay(self) -> float:
        return self._delay

    def cut(self, mode: str | LinkMode = LinkMode.REFUSE) -> None:
        mode = LinkMode(mode)
        if mode is LinkMode.OPEN:
            raise ValueError("cut mode is refuse or blackhole")
        with self._gate:
            self._mode = mode
            if mode is LinkMode.REFUSE:
                self._generation += 1
                dropped, self._carried = list(self._carried), set()
            self._gate.notify_all()
        if mode is LinkMode.REFUSE:
            shut(*dropped)

    def heal(self) -> None:
        """Open again, with no delay."""
        with self._gate:
            self._mode = LinkMode.OPEN
            self._delay = 0.0
            self._gate.notify_all()

    def slow(self, seconds: float) -> None:
        """Hold every chunk this way `seconds` before sending it on (0: none)."""
        if seconds < 0:
            raise ValueError("a delay is >= 0 seconds")
        self._delay = seconds

    def wake(self) -> None:
        """Wake every thread waiting on this link (a proxy is closing)."""
        with self._gate:
            self._gate.notify_all()

    def generation(self) -> int:
        return self._generation

    def wait_open(self, closed: threading.Event) -> bool:
        """Wait while blackholed; False when refused or `closed`."""
        with self._gate:
            while self._mode is LinkMode.BLACKHOLE and not closed.is_set():
                self._gate.wait()
            return self._mode is LinkMode.OPEN and not closed.is_set()

    def admits(self, generation: int, closed: threading.Event) -> bool:
        """May a connection admitted in `generation` carry one more chunk? Waits while
        blackholed."""
        return self.wait_open(closed) and generation == self._generation

    def carry(self, *socks: socket.socket) -> None:
        with self._gate:
            self._carried.update(socks)

    def release(self, *socks: socket.socket) -> None:
        with self._gate:
            self._carried.difference_update(socks)


class LinkedProxy(ProxyServer):
    """A ProxyServer whose connections go over Links: `_carry` forwards one accepted
    connection to the target, each direction through its own Link."""

    def __init__(self, target_host: str, target_port: int, port: int | None = None,
                 host: str = "127.0.0.1", tap: Tap | None = None) -> None:
        self._tap = tap
        self._connection_numbers = itertools.count(1)
        super().__init__(target_host, target_port, port, host)

    def _links(self) -> list[Link]:
        """Every Link this proxy's connections may wait on, to wake in close()."""
        raise NotImplementedError

    def _on_close(self) -> None:
        for link in self._links():
            link.wake()

    def _admit(self, forward: Link, backward: Link) -> tuple[int, int] | None:
        """Wait until both directions are open; their generations, or None to refuse."""
        while forward.wait_open(self._closed) and backward.wait_open(self._closed):
            if forward.mode is LinkMode.OPEN and backward.mode is LinkMode.OPEN:
                return forward.generation(), backward.generation()
        return None

    def _carry(self, client: socket.socket, forward: Link, backward: Link, label: str,
               tapped: bool) -> None:
        """Forward `client` to the target: its bytes over `forward`, the answers over
        `backward`. `tapped`: the tap sees the bytes toward the target."""
        generations = self._admit(forward, backward)
        upstream = self._connect_upstream() if generations is not None else None
        if upstream is None or not self._track(upstream):
            reset(client)
            return
        upstream.settimeout(None)
        socks = (client, upstream)
        forward.carry(*socks)
        backward.carry(*socks)
        tap_label = f"{label}#{next(self._connection_numbers)}" if tapped else None
        try:
            self._spawn(self._pump, upstream, client, backward, generations[1], None,
                        name=f"proxy-pump-{self.port}")
            self._pump(client, upstream, forward, generations[0], tap_label)
        finally:
            forward.release(*socks)
            backward.release(*socks)
            self._untrack(upstream)

    def _pump(self, src: socket.socket, dst: socket.socket, link: Link, generation: int,
              tap_label: str | None) -> None:
        """Copy src to dst over `link`; `tap_label` names the bytes to the tap."""
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                if link.delay and self._closed.wait(link.delay):
                    break
                if not link.admits(generation, self._closed):
                    break
                if tap_label is not None and self._tap is not None:
                    self._tap(tap_label, data)
                dst.sendall(data)
        except OSError:
            pass
        # Either side ending ends both, as a dropped link would: no half-open leftovers.
        shut(src, dst)


class LinkProxy(LinkedProxy):
    """A proxy that forwards bytes to one target until cut; see the module docstring.
    One Link carries both directions."""

    def __init__(self, target_host: str, target_port: int, port: int | None = None,
                 name: str = "", tap: Tap | None = None) -> None:
        self.name = name or f"->{target_host}:{target_port}"
        self._link = Link(self.name)
        super().__init__(target_host, target_port, port, tap=tap)

    @property
    def mode(self) -> LinkMode:
        return self._link.mode

    def cut(self, mode: str | LinkMode = LinkMode.REFUSE) -> None:
        self._link.cut(mode)

    def heal(self) -> None:
        self._link.heal()

    def _links(self) -> list[Link]:
        return [self._link]

    def _serve(self, client: socket.socket) -> None:
        self._carry(client, self._link, self._link, self.name, tapped=True)
