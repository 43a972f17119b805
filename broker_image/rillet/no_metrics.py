"""The broker's metrics when nothing can scrape them: no admin.http.listener configured.

It takes the calls metrics.BrokerMetrics takes (request path, metadata steps) and counts
nothing: prometheus_client and the http.server, gzip and wsgiref modules it loads were about
a tenth of a broker's import time, paid at every start for numbers nobody can read. Which of the two a broker gets is decided once at start-up (Broker.__init__), as the admin
listener is a static config.
"""
from __future__ import annotations

from typing import Any, Protocol


class MetricsSink(Protocol):
    """What a broker's parts call on its metrics: BrokerMetrics or NoMetrics."""
    bytes_in: int

    def request_done(self, listener: str, spec: Any, version: int, seconds: float) -> None: ...

    def fetch_sent(self, size: int, follower: bool) -> None: ...

    def authentication_failed(self, listener_name: str) -> None: ...

    def authorization_denied(self, resource_type: str, operation: str) -> None: ...

    def on_metadata_update(self, delta: Any, image: Any) -> None: ...


class NoMetrics:
    """Counters that count nothing; stateless, so any number of brokers may share one."""

    bytes_in = 0

    def __setattr__(self, name: str, value: Any) -> None:
        # `metrics.bytes_in += n` on the produce path: dropped, not stored.
        pass

    def request_done(self, listener: str, spec: Any, version: int, seconds: float) -> None:
        pass

    def fetch_sent(self, size: int, follower: bool) -> None:
        pass

    def authentication_failed(self, listener_name: str) -> None:
        pass

    def authorization_denied(self, resource_type: str, operation: str) -> None:
        pass

    def on_metadata_update(self, delta: Any, image: Any) -> None:
        pass
