"""A byte-rate quota over a sliding window of samples: Kafka's replication quota (KIP-73).

Pure: every call takes the time, so tests drive it with plain numbers. The rate is the
bytes recorded in the live samples divided by the time they span, counted as at least
(samples - 1) whole sample windows: a fresh quota does not read a first burst as an
enormous rate, and a byte recorded once keeps counting until its sample expires, so a
throttle averages over the whole window rather than reacting to each fetch.

Exceeded means rate > bound. A caller that is over quota leaves its throttled
partitions out of one fetch and tries again later; the bytes of the fetch that
crossed the bound are not taken back, so a burst is at most one fetch over.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..defs.broker_defs import LONG_MAX

UNLIMITED = LONG_MAX


@dataclass
class _Sample:
    start: float
    value: float = 0.0


class RateQuota:
    """Bytes per second over `samples` windows of `window_s` seconds; event loop only."""

    def __init__(self, bound: float = UNLIMITED, samples: int = 11, window_s: float = 1.0
                 ) -> None:
        if samples < 1 or window_s <= 0:
            raise ValueError("a quota needs at least one sample of a positive length")
        self.bound = bound
        self.samples = samples
        self.window_s = window_s
        self._samples: deque[_Sample] = deque()

    @property
    def unlimited(self) -> bool:
        return self.bound >= UNLIMITED

    def record(self, nbytes: float, now: float) -> None:
        self._purge(now)
        if not self._samples or now - self._samples[-1].start >= self.window_s:
            self._samples.append(_Sample(now))
        self._samples[-1].value += nbytes

    def rate(self, now: float) -> float:
        """Bytes per second measured over the window at `now`."""
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0].start, 0.0)
        full = int(elapsed // self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return sum(s.value for s in self._samples) / elapsed if elapsed > 0 else 0.0

    def exceeded(self, now: float) -> bool:
        return not self.unlimited and self.rate(now) > self.bound

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        while self._samples and now - self._samples[0].start >= expire:
            self._samples.popleft()
        while len(self._samples) > self.samples:
            self._samples.popleft()
