"""OnDemand (rillet/on_demand.py): a coordinator is built by its first user or once its
internal topic exists, started once, only after the broker opened it, and told every
metadata step from then on."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rillet.on_demand import OnDemand


class FakeCoordinator:
    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0
        self.updates: list[Any] = []

    async def start(self) -> None:
        self.started += 1

    async def stop(self) -> None:
        self.stopped += 1

    def on_metadata_update(self, delta: Any, new: Any) -> None:
        self.updates.append(delta)


def _image(*topics: str) -> Any:
    return SimpleNamespace(topics={t: object() for t in topics})


def _part() -> tuple[OnDemand[FakeCoordinator], list[FakeCoordinator]]:
    built: list[FakeCoordinator] = []

    def build() -> FakeCoordinator:
        built.append(FakeCoordinator())
        return built[-1]
    return OnDemand("fake coordinator", "__fake", build), built


def test_nothing_is_built_while_nobody_needs_it() -> None:
    async def scenario() -> None:
        part, built = _part()
        await part.open(_image("t"))
        part.on_metadata_update("step", _image("t", "u"))
        await part.stop()
        assert built == [] and part.built is None
    asyncio.run(scenario())


def test_the_first_user_builds_and_starts_it_once() -> None:
    async def scenario() -> None:
        part, built = _part()
        await part.open(_image())
        first = part.get()
        assert part.get() is first and len(built) == 1
        await asyncio.sleep(0)   # the start runs in the background
        assert first.started == 1
        part.on_metadata_update("step", _image("__fake"))
        assert first.updates == ["step"] and first.started == 1
        await part.stop()
        assert first.stopped == 1
    asyncio.run(scenario())


def test_its_topic_at_start_up_builds_and_starts_it_before_serving() -> None:
    async def scenario() -> None:
        part, built = _part()
        await part.open(_image("__fake"))
        [c] = built
        assert c.started == 1   # awaited by open: done before the broker serves
        part.get()
        await asyncio.sleep(0)
        assert c.started == 1
    asyncio.run(scenario())


def test_the_step_that_brings_its_topic_builds_it_but_not_before_open() -> None:
    async def scenario() -> None:
        part, built = _part()
        # Replaying the log at start-up: the broker is not serving yet, nothing starts.
        part.on_metadata_update("replayed", _image("__fake"))
        assert built == []
        await part.open(_image())
        part.on_metadata_update("created", _image("__fake"))
        [c] = built
        await asyncio.sleep(0)
        assert c.started == 1 and c.updates == []   # its start reads the new image
        part.on_metadata_update("next", _image("__fake"))
        assert c.updates == ["next"]
    asyncio.run(scenario())


def test_a_part_built_before_open_starts_at_open() -> None:
    async def scenario() -> None:
        part, built = _part()
        early = part.get()
        await asyncio.sleep(0)
        assert early.started == 0
        await part.open(_image())
        assert early.started == 1 and built == [early]
    asyncio.run(scenario())
