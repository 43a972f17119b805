"""controller/decision_lock.py: one holder at a time, urgent waiters before normal ones,
cancellation never loses the lock; and controller/liveness.py: silence counted from
arrival."""
from __future__ import annotations

import asyncio

from rillet.controller.decision_lock import NORMAL, URGENT, DecisionLock
from rillet.controller.liveness import BrokerLiveness


async def _settle() -> None:
    """Let every ready task run (a bounded number of loop turns, no clock)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_urgent_waiters_go_before_normal_ones_that_waited_longer() -> None:
    async def run() -> list[str]:
        lock = DecisionLock()
        order: list[str] = []

        async def decision(name: str, urgent: bool) -> None:
            async with lock.hold(urgent):
                order.append(name)
                await asyncio.sleep(0)

        await lock.acquire(NORMAL)   # an ISR change being committed
        tasks = [asyncio.create_task(decision(f"isr-{i}", NORMAL)) for i in range(5)]
        await _settle()
        tasks.append(asyncio.create_task(decision("heartbeat", URGENT)))
        tasks.append(asyncio.create_task(decision("fence", URGENT)))
        await _settle()
        assert lock.waiting() == (2, 5)
        lock.release()
        await asyncio.gather(*tasks)
        assert not lock.locked
        return order

    assert asyncio.run(run()) == ["heartbeat", "fence", "isr-0", "isr-1", "isr-2", "isr-3",
                                  "isr-4"]


def test_one_holder_at_a_time() -> None:
    async def run() -> int:
        lock = DecisionLock()
        inside = peak = 0

        async def decision(urgent: bool) -> None:
            nonlocal inside, peak
            async with lock.hold(urgent):
                inside += 1
                peak = max(peak, inside)
                await asyncio.sleep(0)
                inside -= 1

        await asyncio.gather(*(decision(i % 3 == 0) for i in range(30)))
        return peak

    assert asyncio.run(run()) == 1


def test_a_cancelled_waiter_never_keeps_the_lock() -> None:
    async def run() -> None:
        lock = DecisionLock()
        await lock.acquire(NORMAL)
        waiting = asyncio.create_task(lock.acquire(URGENT))
        granted_then_cancelled = asyncio.create_task(lock.acquire(NORMAL))
        await _settle()
        waiting.cancel()          # cancelled while queued
        await _settle()
        lock.release()            # goes to the second waiter ...
        granted_then_cancelled.cancel()   # ... which is cancelled before it runs
        await _settle()
        assert waiting.cancelled() and granted_then_cancelled.cancelled()
        assert not lock.locked, "the lock handed to a cancelled waiter was passed on"
        await asyncio.wait_for(lock.acquire(NORMAL), 5)
        lock.release()

    asyncio.run(run())


def test_silence_is_counted_from_the_last_arrival() -> None:
    live = BrokerLiveness()
    live.activate([1, 2, 3], now=100.0)
    live.touch(1, 105.0)
    live.touch(1, 104.0)   # an older arrival handled late never moves it back
    assert live.silence(1, 110.0) == 5.0
    assert live.expired([1, 2, 3], now=110.0, timeout_s=9.0) == [2, 3]
    assert live.expired([1, 2, 3], now=108.0, timeout_s=9.0) == []
    # A broker never heard by this controller counts from its activation.
    assert live.silence(7, 110.0) == 10.0
    live.forget(1)
    assert live.silence(1, 110.0) == 10.0
    live.deactivate()
    assert not live.active


def test_longest_gap_between_arrivals_is_kept_per_broker() -> None:
    live = BrokerLiveness()
    live.activate([1, 2], now=100.0)
    live.touch(1, 102.0)
    live.touch(1, 106.5)
    live.touch(1, 105.0)   # late, older: neither a gap nor a move back
    live.touch(1, 108.0)
    live.touch(3, 101.0)   # first heard of: no gap yet
    assert live.longest_gaps() == {1: 4.5}
    live.forget(1)
    live.activate([1, 2, 3], now=200.0)   # a new term starts a new record
    assert live.longest_gaps() == {}
