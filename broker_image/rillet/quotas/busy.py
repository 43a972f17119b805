"""The event-loop time one request's handler takes: what request_percentage measures.

Kafka counts the time request handler threads spend on a request, not the time it waits
in a purgatory. rillet's handlers share one event loop, so the measure is the time the
handler's coroutine runs between its suspensions: an acks=all produce waiting for its
replicas, or a fetch long poll, costs only the steps it actually runs. ``BusyTimer``
drives the coroutine step by step and adds up those steps.
"""
from __future__ import annotations

import time
from typing import Any, Coroutine, Generator


class BusyTimer:
    """Await ``BusyTimer(coro)`` in place of ``coro``; ``busy_s`` is its running time."""

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self.busy_s += time.perf_counter() - started
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:   # cancellation included: the handler sees it
                value, error = None, exc
