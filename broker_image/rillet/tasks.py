"""Ending background tasks at shutdown."""
from __future__ import annotations

import asyncio
from typing import Iterable


async def cancel_and_wait(tasks: Iterable["asyncio.Task[object] | None"]) -> None:
    """Cancel each task and wait for it to end; what it raised on the way out is dropped
    (shutdown goes on whatever a finished task was doing)."""
    pending = [t for t in tasks if t is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        while not task.done():
            # Python 3.11's asyncio.wait_for can swallow a cancellation that arrives as its
            # inner future completes, and a loop then runs on (a broker's stop hung on its
            # heartbeat loop): cancel again until the task has really ended.
            await asyncio.wait([task], timeout=1.0)
            if not task.done():
                task.cancel()
        if not task.cancelled():
            task.exception()   # retrieved: what a finished task raised is dropped
