"""A rate quota over a sliding window of samples: Kafka's quota sensor (KIP-13, KIP-73).

One measure for every quota of the broker: the replication throttles (bytes/s) and the
client quotas (bytes/s, request time as a percentage of one thread).

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
    """One window of a rate: when it started and what it counted."""
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
        elapsed = self._span(now)
        return sum(s.value for s in self._samples) / elapsed if elapsed > 0 else 0.0

    def _span(self, now: float) -> float:
        """The seconds the live samples are counted over (Kafka's Rate.windowSize)."""
        elapsed = max(now - self._samples[0].start, 0.0) if self._samples else 0.0
        full = int(elapsed // self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return elapsed

    def exceeded(self, now: float) -> bool:
        return not self.unlimited and self.rate(now) > self.bound

    def throttle_s(self, now: float) -> float:
        """How long the recorder must wait for the rate to fall back to the bound, Kafka's
        (rate - bound) / bound * window: the seconds the excess takes at the bound's pace
        (0 when within it). Not capped, as in Kafka: a request larger than a window's worth
        waits all the time it needs, or its samples would expire first and let the next
        one through early."""
        if self.unlimited:
            return 0.0
        rate = self.rate(now)
        if rate <= self.bound:
            return 0.0
        if self.bound <= 0:   # nothing allowed: hold for a whole window at a time
            return self.samples * self.window_s
        return (rate - self.bound) / self.bound * self._span(now)

    def unrecord(self, amount: float, now: float) -> None:
        """Take back what was just recorded (a throttled fetch sends nothing, as Kafka's)."""
        self._purge(now)
        if self._samples:
            self._samples[-1].value -= amount

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        while self._samples and now - self._samples[0].start >= expire:
            self._samples.popleft()
        while len(self._samples) > self.samples:
            self._samples.popleft()
