"""Waiting for a condition a real process reaches in its own time, with a bound."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def read_until(read: Callable[[], T], done: Callable[[T], bool], timeout: float,
               interval: float = 0.1) -> T:
    """Call read() until done(value) holds or `timeout` seconds pass; the last value read.

    For waits whose assertion wants to say what was seen instead (e.g. "31 records left")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if done(value):
            return value
        time.sleep(interval)
    return read()


def poll_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """True as soon as predicate() holds, False once `timeout` seconds pass without it."""
    return bool(read_until(predicate, bool, timeout, interval))


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.1) -> None:
    """Like poll_until, but a timeout fails the test naming what never happened."""
    if not poll_until(predicate, timeout, interval):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
