"""Waiting for a condition a real process reaches in its own time, with a bound."""
from __future__ import annotations

import time
from typing import Callable


def poll_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """True as soon as predicate() holds, False once `timeout` seconds pass without it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.1) -> None:
    """Like poll_until, but a timeout fails the test naming what never happened."""
    if not poll_until(predicate, timeout, interval):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
