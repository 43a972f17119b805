"""The controller's decision lock: one decision at a time, broker liveness first.

Every decision holds the lock from reading the image to its records being committed, so two
decisions never race on one image. Waiters queue in two lanes: URGENT (registration,
unfencing, fencing: decisions about which brokers are alive) and NORMAL (ISR changes,
topics, configs, reassignments, elections). A released lock goes to the oldest urgent
waiter first, so a broker's liveness waits for at most the one decision being committed,
never behind a queue of ISR or topic work (the bug: healthy brokers fenced while a few
hundred AlterPartitions held the lock in turn).

Event loop only; not thread-safe.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import AsyncIterator

URGENT = True
NORMAL = False


class DecisionLock:
    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._normal: deque[asyncio.Future[None]] = deque()

    @property
    def locked(self) -> bool:
        return self._held

    def waiting(self) -> tuple[int, int]:
        """(urgent, normal) waiters, cancelled ones included until they are passed over."""
        return len(self._urgent), len(self._normal)

    async def acquire(self, urgent: bool) -> None:
        if not self._held and not self._urgent and not self._normal:
            self._held = True
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._urgent if urgent else self._normal
        lane.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Handed the lock just as we were cancelled: pass it on, or it is lost.
                self.release()
            else:
                with contextlib.suppress(ValueError):
                    lane.remove(waiter)
            raise

    def release(self) -> None:
        """Hand the lock to the next waiter (urgent lane first), or free it."""
        for lane in (self._urgent, self._normal):
            while lane:
                waiter = lane.popleft()
                if not waiter.done():
                    waiter.set_result(None)   # still held: ownership moves to the waiter
                    return
        self._held = False

    @contextlib.asynccontextmanager
    async def hold(self, urgent: bool) -> AsyncIterator[None]:
        await self.acquire(urgent)
        try:
            yield
        finally:
            self.release()
