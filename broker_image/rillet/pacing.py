"""Long loops on the event loop, in slices: yield to other tasks every PACE_S of work.

One node runs its Raft timers, the controller's heartbeat handling and every client on one
event loop. A loop over a few thousand partitions that never yields holds all of them: the
bench (bench/scale.py) saw creating 1,000 partitions block every node for ~16 s, the followers
stop fetching from the Raft leader and the leader resign (check quorum after
controller.quorum.fetch.timeout.ms, 2 s). A Pacer keeps each slice short enough that timers
and heartbeats are served between slices.

Event loop only; one Pacer per loop that uses it (it keeps that loop's slice start).
"""
from __future__ import annotations

import asyncio
import time

# Work between two yields: well under the Raft fetch timeout (2 s) and the heartbeat
# interval (2 s) even when this machine is slow.
PACE_S = 0.05


class Pacer:
    """Slices of `budget_s`; after each, a yield, and (`rest` > 0) a pause of `rest` times the
    slice's length, so bulk background work leaves the loop to Raft and heartbeats even when
    the machine is too busy to run everything at once."""

    def __init__(self, budget_s: float = PACE_S, rest: float = 0.0) -> None:
        self._budget_s = budget_s
        self._rest = rest
        self._since = time.monotonic()

    def spent(self) -> bool:
        """This slice has used its budget (the caller should yield, or defer the rest)."""
        return time.monotonic() - self._since >= self._budget_s

    def restart(self) -> None:
        self._since = time.monotonic()

    async def pace(self) -> None:
        """Yield to the event loop (and rest) once this slice's budget is spent."""
        if self.spent():
            await asyncio.sleep(self._rest * (time.monotonic() - self._since))
            self.restart()
