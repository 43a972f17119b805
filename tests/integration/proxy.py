"""A loopback TCP proxy that loses the response to a chosen request.

Used to make real producers retry: the broker sees the request and answers it,
the proxy swallows that answer and cuts the connection, and the client resends
the same batch on a new connection.
"""
from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

from tests.tcp_proxy import ProxyServer, recv_exact, shut

# How long the request side waits for the broker to answer a request whose
# response is to be lost, before cutting the connection anyway.
ANSWER_WAIT = 10.0


@dataclass(frozen=True)
class LostResponse:
    """A response the client never got, kept so a test can decode what it missed."""
    api_version: int
    frame: bytes


@dataclass
class _Link:
    """One proxied connection and, once chosen, the request whose response it loses."""
    client: socket.socket
    upstream: socket.socket
    # Set before the chosen request is forwarded, so its response can never slip
    # through to the client: from then on the response pump forwards nothing.
    mute_correlation: int | None = None
    mute_version: int = 0
    swallowed: threading.Event = field(default_factory=threading.Event)


class DroppingProxy(ProxyServer):
    def __init__(self, target_host: str, target_port: int, drop_every: int,
                 api_key: int = 0, max_drops: int = 5, port: int | None = None) -> None:
        self.drop_every = drop_every
        self.api_key = api_key
        self.max_drops = max_drops
        self.seen = 0
        self._chosen = 0
        self.lost: list[LostResponse] = []
        self._links: list[_Link] = []
        super().__init__(target_host, target_port, port)

    @property
    def dropped(self) -> int:
        """Responses the broker really sent and the client really never got."""
        with self._lock:
            return len(self.lost)

    def _on_close(self) -> None:
        with self._lock:
            links = list(self._links)
        for link in links:
            link.swallowed.set()  # a request pump waiting for its swallowed answer stops now

    def _serve(self, client: socket.socket) -> None:
        upstream = self._connect_upstream()
        if upstream is None or not self._track(upstream):
            shut(client)
            return
        upstream.settimeout(None)
        link = _Link(client, upstream)
        with self._lock:
            self._links.append(link)
        try:
            self._spawn(self._pump_responses, link, name=f"dropping-responses-{self.port}")
            self._pump_requests(link)
        finally:
            with self._lock:
                self._links.remove(link)
            self._untrack(upstream)

    def _should_drop(self, frame: bytes) -> bool:
        if len(frame) < 8 or struct.unpack_from(">h", frame)[0] != self.api_key:
            return False
        with self._lock:
            self.seen += 1
            if self._chosen < self.max_drops and self.seen % self.drop_every == 0:
                self._chosen += 1
                return True
        return False

    def _pump_requests(self, link: _Link) -> None:
        try:
            while True:
                head = recv_exact(link.client, 4)
                frame = recv_exact(link.client, struct.unpack(">i", head)[0])
                if self._should_drop(frame):
                    link.mute_version, link.mute_correlation = struct.unpack_from(">hi", frame, 2)
                    link.upstream.sendall(head + frame)
                    # Requests queued behind this one are never forwarded; the
                    # connection is cut once the broker's answer has been swallowed.
                    link.swallowed.wait(ANSWER_WAIT)
                    break
                link.upstream.sendall(head + frame)
        except OSError:
            pass
        shut(link.client, link.upstream)

    def _pump_responses(self, link: _Link) -> None:
        try:
            while True:
                head = recv_exact(link.upstream, 4)
                frame = recv_exact(link.upstream, struct.unpack(">i", head)[0])
                if link.mute_correlation is None:
                    link.client.sendall(head + frame)
                elif struct.unpack_from(">i", frame)[0] == link.mute_correlation:
                    with self._lock:
                        self.lost.append(LostResponse(link.mute_version, frame))
                    link.swallowed.set()
                    break
                # Any other response while muted is dropped too: the client retries it.
        except OSError:
            pass
        shut(link.client, link.upstream)
