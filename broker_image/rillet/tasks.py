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
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
