"""LogCreator: a metadata step creates logs only for its slice, the rest in the background."""
from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest

from rillet.metadata.directories import LOST, UNASSIGNED
from rillet.pacing import Pacer
from rillet.replication.log_creator import LogCreator
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager

TopicPartition = tuple[str, int]
Started = tuple[LogManager, LogCreator, list[list[TopicPartition]]]


def _creator(tmp_path: Path, wanted: set[TopicPartition] | None = None) -> Started:
    logs = LogManager([tmp_path / "data"])
    handed: list[list[TopicPartition]] = []
    creator = LogCreator(logs, lambda topic: LogConfig(),
                         lambda tp: wanted is None or tp in wanted, handed.append,
                         lambda tp: UNASSIGNED, lambda placed: None)
    return logs, creator, handed


@contextlib.asynccontextmanager
async def _started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   wanted: set[TopicPartition] | None = None) -> AsyncIterator[Started]:
    """A running creator whose slices have a zero budget: a step creates no log of a
    non-internal topic itself, and the task hands over every log as its own slice."""
    monkeypatch.setattr("rillet.replication.log_creator.Pacer", lambda **_: Pacer(0.0))
    logs, creator, handed = _creator(tmp_path, wanted)
    creator.start()
    try:
        yield logs, creator, handed
    finally:
        await creator.stop()
        await logs.close()


async def _drained(creator: LogCreator) -> None:
    for _ in range(2000):
        if not creator.queued:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{creator.queued} log(s) still queued")


def test_a_small_step_creates_its_logs_before_returning(tmp_path: Path) -> None:
    logs, creator, handed = _creator(tmp_path)
    creator.create([("t", 0), ("t", 1)])
    assert logs.get("t", 0) is not None and logs.get("t", 1) is not None
    assert creator.queued == 0 and handed == []


def test_a_large_step_defers_the_rest_to_the_background(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        async with _started(tmp_path, monkeypatch) as (logs, creator, handed):
            tps = [("t", p) for p in range(20)]
            creator.create(tps)
            assert logs.get("t", 0) is None
            assert creator.queued == 20
            await _drained(creator)
            assert all(logs.get(*tp) is not None for tp in tps)
            assert sorted(tp for chunk in handed for tp in chunk) == tps
            assert len(handed) > 1   # handed over slice by slice, not at the end
    asyncio.run(run())


def test_internal_topics_and_unwanted_partitions(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Internal topics' logs never wait (their coordinators load on the step); a queued
    partition the image no longer places here (topic deleted meanwhile) gets no log."""
    async def run() -> None:
        async with _started(tmp_path, monkeypatch, wanted={("t", 1)}) as (logs, creator,
                                                                          handed):
            creator.create([("t", 0), ("__consumer_offsets", 0), ("t", 1), ("t", 2)])
            assert logs.get("__consumer_offsets", 0) is not None
            await _drained(creator)
            assert logs.get("t", 1) is not None and logs.get("t", 2) is None
            assert handed == [[("t", 1)]]
    asyncio.run(run())


def test_start_up_waits_for_every_log_while_the_loop_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        async with _started(tmp_path, monkeypatch) as (logs, creator, _):
            ticker = asyncio.ensure_future(other())
            try:
                tps = [("t", p) for p in range(10)]
                await asyncio.wait_for(creator.create_all(tps), 60)
                assert all(logs.get(*tp) is not None for tp in tps)
                assert ticks >= 10   # served while the logs were made, not after
            finally:
                ticker.cancel()
    asyncio.run(run())


def test_pacer_yields_only_when_its_slice_is_spent() -> None:
    async def run() -> None:
        ran: list[str] = []

        async def other() -> None:
            ran.append("other")

        task = asyncio.ensure_future(other())
        await Pacer(3600.0).pace()
        assert ran == []              # budget left: no yield
        await Pacer(0.0).pace()
        assert ran == ["other"]       # spent: the other task ran
        await task
    asyncio.run(run())


def test_where_each_replica_is_goes_to_the_controller_when_the_image_says_otherwise(
        tmp_path: Path) -> None:
    """A new log's dir, and LOST for a replica assigned to a dir this broker cannot see
    while one of its dirs is offline (never made elsewhere); nothing when the image
    already says it."""
    data, dead = tmp_path / "data", tmp_path / "dead"
    dir_id, elsewhere = uuid.UUID(int=40), uuid.UUID(int=41)
    logs = LogManager([data, dead])
    logs.load_logs(lambda t, p: LogConfig(), {data: dir_id}, {dead: "unreadable"})
    assigned = {("t", 0): UNASSIGNED, ("t", 1): elsewhere, ("t", 2): dir_id}
    placed: dict[TopicPartition, uuid.UUID] = {}
    creator = LogCreator(logs, lambda topic: LogConfig(), lambda tp: True, lambda tps: None,
                         assigned.__getitem__, placed.update)
    creator.create(list(assigned))
    assert placed == {("t", 0): dir_id, ("t", 1): LOST}
    assert logs.get("t", 1) is None and logs.get("t", 2) is not None
    placed.clear()
    assigned.update(placed_by_controller := {("t", 0): dir_id, ("t", 1): LOST})
    creator.create(list(placed_by_controller))
    assert placed == {}
