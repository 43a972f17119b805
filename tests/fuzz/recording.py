"""Recording what Kafka clients send, for the fuzz corpus (tests/fuzz/capture/).

`StreamTap` is a `LinkProxy` tap (tests/tcp_proxy.py) keeping the bytes each connection
sent toward the target, and turns them into size-prefixed request frames with
`corpus.split_frames`, per connection, so a frame never spans two connections.
`RecordingProxy` is a LinkProxy in front of one broker with a StreamTap of its own: give
clients its address (and the broker advertised.listeners naming it) and every request they
send is recorded. The controller links of a LocalCluster take a StreamTap directly.
"""
from __future__ import annotations

import threading

from tests.fuzz.corpus import split_frames
from tests.tcp_proxy import LinkProxy


class StreamTap:
    """Bytes per connection label, from any number of threads; a LinkProxy `tap`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, bytearray] = {}

    def __call__(self, connection: str, data: bytes) -> None:
        with self._lock:
            self._streams.setdefault(connection, bytearray()).extend(data)

    def frames(self) -> list[bytes]:
        """Every connection's request frames, connections in the order they first sent."""
        with self._lock:
            streams = [bytes(s) for s in self._streams.values()]
        return [frame for stream in streams for frame in split_frames(stream)]

    def clear(self) -> None:
        with self._lock:
            self._streams.clear()


class RecordingProxy(LinkProxy):
    """A forwarding proxy (never cut) that records what each client sends to the broker."""

    def __init__(self, target_host: str, target_port: int, port: int | None = None) -> None:
        self.recorded = StreamTap()
        super().__init__(target_host, target_port, port, name="client", tap=self.recorded)

    def frames(self) -> list[bytes]:
        return self.recorded.frames()
