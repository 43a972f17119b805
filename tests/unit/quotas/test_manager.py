"""The client quota manager: throttle times from a fake clock, Kafka's formula."""
from __future__ import annotations

import asyncio

import pytest

from rillet.quotas.busy import BusyTimer
from rillet.quotas.entity import entity_of
from rillet.quotas.manager import UNBOUNDED, ClientQuotaManager, user_of
from rillet.quotas.rate import RateQuota

P = "producer_byte_rate"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _manager(samples: int = 11, window_s: int = 1) -> tuple[ClientQuotaManager, Clock]:
    clock = Clock()
    config = {"quota.window.num": samples, "quota.window.size.seconds": window_s}
    return ClientQuotaManager(lambda: config, clock), clock


def test_throttle_is_the_time_the_excess_takes_at_the_bound() -> None:
    manager, clock = _manager()
    quotas = {entity_of({"client-id": "slow"}): {P: 1000.0}}
    # 10 s of allowance at once (a fresh window spans 10 samples) is not throttled...
    assert manager.record(quotas, P, "ANONYMOUS", "slow", 10_000) == 0.0
    # ...the next 2000 bytes are: 12,000 bytes at 1000/s need 12 s, 10 have passed.
    assert manager.record(quotas, P, "ANONYMOUS", "slow", 2000) == pytest.approx(2.0)
    # Kafka's span stays (samples - 1) windows until that much time has passed: the
    # client is throttled again until then, and free once the burst's sample expires.
    clock.now += 2.0
    assert manager.record(quotas, P, "ANONYMOUS", "slow", 0) == pytest.approx(2.0)
    clock.now += 9.0
    assert manager.record(quotas, P, "ANONYMOUS", "slow", 0) == 0.0


def test_a_request_percentage_wait_is_at_most_one_window_a_byte_rate_wait_is_not() -> None:
    manager, _ = _manager(window_s=2)
    # request_percentage counts percent of one thread (seconds * 100): a bound of 1 allows
    # 10 ms of handler time a second, so 200 s of it (20,000) owes minutes, capped at the 2 s
    # window as Kafka caps it; a byte rate's wait is not capped.
    busy = {entity_of({"client-id": "busy"}): {"request_percentage": 1.0}}
    assert manager.record(busy, "request_percentage", "u", "busy", 20_000) == pytest.approx(2.0)
    heavy = {entity_of({"client-id": "heavy"}): {P: 1000.0}}
    assert manager.record(heavy, P, "u", "heavy", 200_000) > 100


def test_other_clients_and_unquoted_keys_are_not_held() -> None:
    manager, _ = _manager()
    quotas = {entity_of({"client-id": "slow"}): {P: 1.0}}
    assert manager.record(quotas, P, "ANONYMOUS", "slow", 10**6) > 0
    assert manager.record(quotas, P, "ANONYMOUS", "fast", 10**6) == 0.0
    assert manager.record(quotas, "consumer_byte_rate", "ANONYMOUS", "slow", 10**6) == 0.0
    assert manager.record({}, P, "ANONYMOUS", "slow", 10**6) == 0.0


def test_a_user_quota_is_shared_by_its_clients_a_default_one_is_not() -> None:
    manager, _ = _manager()
    quotas = {entity_of({"user": "alice"}): {P: 1000.0}, entity_of({"user": None}): {P: 1000.0}}
    assert manager.record(quotas, P, "alice", "a", 10_000) == 0.0
    assert manager.record(quotas, P, "alice", "b", 1000) > 0        # same group
    assert manager.record(quotas, P, "bob", "a", 10_000) == 0.0     # a group of its own


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    manager, _ = _manager()
    quotas = {entity_of({"client-id": None}): {"consumer_byte_rate": 100.0}}
    assert manager.record(quotas, "consumer_byte_rate", "u", "c", 5000) > 0
    manager.unrecord(quotas, "consumer_byte_rate", "u", "c", 5000)
    assert manager.record(quotas, "consumer_byte_rate", "u", "c", 0) == 0.0


def test_allowance_is_what_a_fresh_window_accepts() -> None:
    manager, _ = _manager(samples=5, window_s=2)
    quotas = {entity_of({"client-id": None}): {"consumer_byte_rate": 100.0}}
    assert manager.allowance(quotas, "consumer_byte_rate", "u", "c") == 800
    assert manager.allowance(quotas, P, "u", "c") == UNBOUNDED
    assert manager.record(quotas, "consumer_byte_rate", "u", "c", 800) == 0.0


def test_a_request_larger_than_the_window_waits_all_it_needs() -> None:
    # 10 s worth at once over a 2 s span: 8 s more at the bound's pace, past the window
    # (capped at the window, the sample would expire and let the next one through early).
    q = RateQuota(bound=100, samples=3, window_s=1.0)
    q.record(1000, 0.0)
    assert q.throttle_s(0.0) == pytest.approx(8.0)


def test_user_of_strips_the_principal_type() -> None:
    assert user_of("User:alice") == "alice" and user_of("ANONYMOUS") == "ANONYMOUS"


def test_busy_timer_counts_running_steps_not_waits() -> None:
    async def handler() -> str:
        await asyncio.sleep(0.2)   # a purgatory wait: not busy time
        return "done"

    async def main() -> tuple[str, float]:
        timer = BusyTimer(handler())
        return await timer, timer.busy_s

    result, busy = asyncio.run(main())
    assert result == "done" and busy < 0.1


def test_busy_timer_passes_errors_and_cancellation_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def slow() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        with pytest.raises(ValueError):
            await BusyTimer(failing())
        task = asyncio.ensure_future(_wrap())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _wrap() -> None:
        await BusyTimer(slow())

    asyncio.run(main())
