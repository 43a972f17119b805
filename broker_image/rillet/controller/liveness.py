"""When the active controller last heard from each broker (Kafka's BrokerHeartbeatManager).

A heartbeat counts from the moment it arrives, before it waits for anything: how long a
decision about it later waits for the decision lock says nothing about the broker. A
broker is expired once it has been silent for longer than broker.session.timeout.ms.
The longest gap between two arrivals from each broker is kept too (metrics.py exposes it):
how close a healthy broker came to being fenced, which a count of fencings cannot show.

Owned by the Controller (active controller only); event loop only. Times are
time.monotonic() seconds, passed in so the logic is testable without a clock.
"""
from __future__ import annotations

from typing import Iterable


class BrokerLiveness:
    def __init__(self) -> None:
        self._last: dict[int, float] = {}
        self._longest: dict[int, float] = {}
        self._active_since: float | None = None

    @property
    def active(self) -> bool:
        return self._active_since is not None

    def activate(self, brokers: Iterable[int], now: float) -> None:
        """This node just became the active controller and has heard nobody yet: every
        known broker gets a full session from now."""
        self._active_since = now
        self._last = {b: now for b in brokers}
        self._longest = {}

    def deactivate(self) -> None:
        self._active_since = None

    def touch(self, node_id: int, now: float) -> None:
        """A heartbeat (or registration) of `node_id` arrived at `now`."""
        last = self._last.get(node_id)
        if last is None or now > last:
            if last is not None:
                self._longest[node_id] = max(self._longest.get(node_id, 0.0), now - last)
            self._last[node_id] = now

    def forget(self, node_id: int) -> None:
        self._last.pop(node_id, None)
        self._longest.pop(node_id, None)

    def longest_gaps(self) -> dict[int, float]:
        """node id -> the longest time between two of its arrivals since activation (a
        restarted broker's gap spans its downtime)."""
        return dict(self._longest)

    def silence(self, node_id: int, now: float) -> float:
        """Seconds since `node_id` was last heard (since activation if never)."""
        since = self._active_since if self._active_since is not None else now
        return now - self._last.get(node_id, since)

    def expired(self, node_ids: Iterable[int], now: float, timeout_s: float) -> list[int]:
        """Those of `node_ids` silent for longer than `timeout_s`."""
        return [n for n in node_ids if self.silence(n, now) > timeout_s]
