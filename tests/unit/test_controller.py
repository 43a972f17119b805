"""The controller over a real metadata log: serialised decisions, durable replay."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rillet.controller.controller import Controller, TopicSpec
from rillet.metadata.log import MetadataLog
from rillet.protocol import errors


def _controller(root: Path) -> Controller:
    ctrl = Controller(MetadataLog.open(root), "cluster", 1, lambda: (1, 1))
    ctrl.load()
    return ctrl


def test_concurrent_relative_config_changes_are_not_lost(tmp_path: Path) -> None:
    """Each change is computed from the overrides it applies to (IncrementalAlterConfigs
    APPEND/SUBTRACT): ten concurrent increments of one value give ten, and survive a replay."""

    def increment(current: dict[str, str]) -> dict[str, str | None]:
        return {"retention.ms": str(int(current.get("retention.ms", "0")) + 1)}

    async def run() -> None:
        ctrl = _controller(tmp_path)
        await ctrl.register_broker(1, "127.0.0.1", 9092, None)
        [created] = await ctrl.create_topics([TopicSpec("t", 1)])
        assert created.error is None
        await asyncio.gather(*(ctrl.alter_topic_configs("t", increment, False, False)
                               for _ in range(10)))
        assert ctrl.image.topic_config("t") == {"retention.ms": "10"}

    asyncio.run(run())
    assert _controller(tmp_path).image.topic_config("t") == {"retention.ms": "10"}


def test_create_partitions_refuses_assignments_of_another_replication_factor(
        tmp_path: Path) -> None:
    async def run() -> None:
        ctrl = _controller(tmp_path)
        await ctrl.register_broker(1, "127.0.0.1", 9092, None)
        await ctrl.create_topics([TopicSpec("t", 1)])
        with pytest.raises(errors.InvalidReplicaAssignment, match="needs 1 replicas"):
            await ctrl.create_partitions("t", 2, [[1, 1]], False)
        assert len(ctrl.image.topics["t"].partitions) == 1
        await ctrl.create_partitions("t", 2, [[1]], False)
        assert len(ctrl.image.topics["t"].partitions) == 2

    asyncio.run(run())
