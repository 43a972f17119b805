"""cancel_and_wait ends tasks even when a cancellation is swallowed (as Python 3.11's
asyncio.wait_for can do when its inner future completes at the same moment)."""
from __future__ import annotations

import asyncio

from rillet.tasks import cancel_and_wait


def test_a_task_that_swallows_one_cancellation_is_still_ended() -> None:
    swallowed = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if not swallowed:
                    swallowed.append(True)   # what a racing wait_for does: carry on
                    continue
                raise

    async def main() -> asyncio.Task[None]:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0.1)
        await asyncio.wait_for(cancel_and_wait([task]), 10)
        return task

    task = asyncio.run(main())
    assert swallowed and task.cancelled()


def test_what_a_finished_task_raised_is_dropped() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        task = asyncio.create_task(fails())
        await asyncio.sleep(0)
        await cancel_and_wait([task, None])

    asyncio.run(main())
