"""The replica manager's two waiting queues (Kafka's delayed-produce and delayed-fetch
purgatories): futures woken by what they wait for, never polled.

- AcksWaiters: acks=all produce requests, each until the partition's high watermark reaches
  its last offset; failed at once when this broker stops leading the partition.
- FetchWaiters: fetches that found too little data (fetch.min.bytes, max.wait.ms), woken by
  any new data or high watermark on one of their partitions; they then read again.
"""
from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from ..protocol import errors

TopicPartition = tuple[str, int]


@dataclass
class _AcksWaiter:
    offset: int
    done: asyncio.Future[None]


class AcksWaiters:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, list[_AcksWaiter]] = {}

    async def wait(self, tp: TopicPartition, offset: int, timeout_s: float) -> None:
        """Return once `reached(tp, hw)` names a high watermark >= `offset`, or raise."""
        waiter = _AcksWaiter(offset, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(tp, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.done), timeout_s)
        except asyncio.TimeoutError:
            raise errors.RequestTimedOut(
                f"{tp[0]}-{tp[1]}: not replicated to the in-sync replicas within "
                f"{timeout_s:.1f}s") from None
        finally:
            waiters = self._waiters.get(tp)
            if waiters and waiter in waiters:
                waiters.remove(waiter)

    def reached(self, tp: TopicPartition, high_watermark: int) -> None:
        for waiter in self._waiters.get(tp, ()):
            if waiter.offset <= high_watermark and not waiter.done.done():
                waiter.done.set_result(None)

    def fail(self, tp: TopicPartition, exc: Exception) -> None:
        for waiter in self._waiters.pop(tp, ()):
            if not waiter.done.done():
                waiter.done.set_exception(exc)

    def fail_all(self, exc: Exception) -> None:
        for tp in list(self._waiters):
            self.fail(tp, exc)


class FetchWaiters:
    """Keyed by partition, or by whatever else wakes a fetch (a follower's fetch session)."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, list[asyncio.Future[None]]] = {}

    def wake(self, tp: Hashable) -> None:
        """New data or a new high watermark on `tp`: wake the fetches waiting on it."""
        for fut in self._waiters.pop(tp, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait(self, tps: Iterable[Hashable], timeout: float) -> None:
        """Return when any of `tps` gets new data, or after `timeout` seconds."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(tps)
        for tp in keys:
            self._waiters.setdefault(tp, []).append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for tp in keys:
                waiting = self._waiters.get(tp)
                if waiting and fut in waiting:
                    waiting.remove(fut)
                    if not waiting:
                        del self._waiters[tp]
