"""RateQuota: Kafka's sampled-window byte rate, driven with plain clock values."""
from __future__ import annotations

import pytest

from rillet.quotas.rate import UNLIMITED, RateQuota


def test_fresh_quota_counts_a_burst_over_the_whole_window() -> None:
    q = RateQuota(bound=100, samples=11, window_s=1.0)
    q.record(1000, now=0.0)
    # One burst at t=0 is spread over (samples - 1) windows, not over ~0 seconds.
    assert q.rate(0.0) == pytest.approx(100.0)
    assert not q.exceeded(0.0)
    q.record(1, now=0.0)
    assert q.exceeded(0.0)
    # Time passing counts in the span: 1001 bytes over 10.5 s is under the bound again.
    assert not q.exceeded(0.5)


def test_rate_falls_as_samples_expire() -> None:
    q = RateQuota(bound=100, samples=3, window_s=1.0)
    q.record(1000, now=0.0)
    assert q.exceeded(0.1)          # 1000 bytes over at least 2 s: 500/s
    assert q.exceeded(2.5)          # still in the window: 1000 / 2.5
    assert not q.exceeded(3.0)      # the sample expired after 3 windows
    assert q.rate(3.0) == 0.0


def test_samples_roll_and_old_ones_drop() -> None:
    q = RateQuota(bound=1_000_000, samples=2, window_s=1.0)
    for t in range(10):
        q.record(100, now=float(t))
    # Only the samples of the last two windows count: 200 bytes over 1..2 seconds.
    assert q.rate(9.0) == pytest.approx(200 / 1.0)
    assert q.rate(9.5) == pytest.approx(200 / 1.5)


def test_steady_flow_at_the_bound_is_not_exceeded_above_is() -> None:
    q = RateQuota(bound=1000, samples=11, window_s=1.0)
    t = 0.0
    while t < 30:
        q.record(100, now=t)
        t += 0.1
    assert q.rate(t) == pytest.approx(1000, rel=0.1)
    q.record(5000, now=t)
    assert q.exceeded(t)


def test_unlimited_is_never_exceeded() -> None:
    q = RateQuota(UNLIMITED)
    q.record(10**15, now=0.0)
    assert q.unlimited and not q.exceeded(0.0)


def test_zero_bound_allows_nothing_once_something_passed() -> None:
    q = RateQuota(bound=0, samples=2, window_s=1.0)
    assert not q.exceeded(0.0)
    q.record(1, now=0.0)
    assert q.exceeded(1.0)
    assert not q.exceeded(2.0)


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValueError):
        RateQuota(100, samples=0)
