"""A wall clock that never jumps: the wall time read once, advanced by the monotonic clock.

For parts that take one `clock()` for both their deadlines and the timestamps they write,
such as the group coordinator (session, rebalance and sync deadlines, and commit and state
timestamps). On the plain wall clock (time.time) an NTP step of +10 minutes expires every
member's session at once, and a step back keeps a dead member's partitions for 10 minutes;
Kafka's coordinator runs its deadlines on the monotonic clock. Here deadlines never move
with a step, and timestamps stay wall times as read at start-up plus the time elapsed since:
after a step they differ from the system's wall clock by the step, until the process
restarts (offsets then expire by the clock they were committed with).
"""
from __future__ import annotations

import time
from typing import Callable


def steady_clock(wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> Callable[[], float]:
    """A clock(): seconds since the epoch at the first read, then monotonic."""
    offset = wall() - monotonic()

    def clock() -> float:
        return offset + monotonic()
    return clock
