"""The controller over a real metadata log and a one-voter quorum: serialised
decisions, durable replay."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rillet.defs.broker_config import BrokerConfig, Voter
from rillet.controller.controller import Controller
from rillet.controller.topics import TopicSpec
from rillet.metadata.log import METADATA_TOPIC, MetadataLog
from rillet.protocol import errors
from rillet.raft.roles import RaftTiming
from rillet.raft.node import RaftNode
from rillet.raft.quorum_state import QuorumStateFile


async def _controller(root: Path) -> Controller:
    """A started controller that is its own quorum, with broker 1 registered and live."""
    config = BrokerConfig.load(None, {"num.partitions": "1", "default.replication.factor": "1"})
    ctrl = Controller("cluster", 1, config)
    raft = RaftNode(1, {1: Voter(1, "127.0.0.1", 0)}, "cluster", MetadataLog.open(root),
                    METADATA_TOPIC, QuorumStateFile(root), RaftTiming(),
                    lambda batches: ctrl.apply_committed([(last, records)
                                                          for last, records, _ in batches]))
    ctrl.attach(raft)
    await raft.start()
    assert await raft.wait_for(lambda: raft.is_active, 5)
    epoch = await ctrl.register_broker(1, "127.0.0.1", 9092, None, "incarnation-1")
    await ctrl.broker_heartbeat(1, epoch, raft.applied_offset, False)
    assert [b.node_id for b in ctrl.image.live_brokers] == [1]
    return ctrl


async def _stop(ctrl: Controller) -> None:
    await ctrl.raft.stop()
    ctrl.raft.log.close()


def test_concurrent_relative_config_changes_are_not_lost(tmp_path: Path) -> None:
    """Each change is computed from the overrides it applies to (IncrementalAlterConfigs
    APPEND/SUBTRACT): ten concurrent increments of one value give ten, and survive a replay."""

    def increment(current: dict[str, str]) -> dict[str, str | None]:
        return {"retention.ms": str(int(current.get("retention.ms", "0")) + 1)}

    async def run() -> None:
        ctrl = await _controller(tmp_path)
        [created] = await ctrl.create_topics([TopicSpec("t", 1)])
        assert created.error is None
        await asyncio.gather(*(ctrl.alter_topic_configs("t", increment, False, False)
                               for _ in range(10)))
        assert ctrl.image.topic_config("t") == {"retention.ms": "10"}
        await _stop(ctrl)

    async def replayed() -> dict[str, str]:
        ctrl = await _controller(tmp_path)
        config = dict(ctrl.image.topic_config("t"))
        await _stop(ctrl)
        return config

    asyncio.run(run())
    assert asyncio.run(replayed()) == {"retention.ms": "10"}


def test_create_partitions_refuses_assignments_of_another_replication_factor(
        tmp_path: Path) -> None:
    async def run() -> None:
        ctrl = await _controller(tmp_path)
        await ctrl.create_topics([TopicSpec("t", 1)])
        with pytest.raises(errors.InvalidReplicaAssignment, match="needs 1 replicas"):
            await ctrl.create_partitions("t", 2, [[1, 1]], False)
        assert len(ctrl.image.topics["t"].partitions) == 1
        await ctrl.create_partitions("t", 2, [[1]], False)
        assert len(ctrl.image.topics["t"].partitions) == 2
        await _stop(ctrl)

    asyncio.run(run())
