"""The controller over a real metadata log and a one-voter quorum: serialised
decisions, durable replay."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rillet.defs.broker_config import BrokerConfig, Voter
from rillet.controller.controller import Controller
from rillet.controller.decision_lock import NORMAL
from rillet.controller.isr import IsrChange
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


async def _three_brokers(root: Path) -> Controller:
    """The controller of _controller with brokers 2 and 3 registered and unfenced too."""
    ctrl = await _controller(root)
    for b in (2, 3):
        epoch = await ctrl.register_broker(b, "127.0.0.1", 9092 + b, None, f"incarnation-{b}")
        await ctrl.broker_heartbeat(b, epoch, ctrl.raft.applied_offset, False)
    assert ctrl.image.live_broker_ids == {1, 2, 3}
    return ctrl


def test_a_batch_of_isr_changes_is_one_metadata_batch_answered_per_partition(
        tmp_path: Path) -> None:
    async def run() -> None:
        ctrl = await _three_brokers(tmp_path)
        partitions = 50
        [created] = await ctrl.create_topics([TopicSpec(
            "t", assignments={p: [1, 2, 3] for p in range(partitions)})])
        assert created.error is None
        parts = ctrl.image.topics["t"].partitions
        changes = [IsrChange("t", p, parts[p].leader_epoch, parts[p].partition_epoch, (1, 2))
                   for p in range(partitions)]
        # One decided from stale state: refused alone, the others go through.
        changes[7] = IsrChange("t", 7, parts[7].leader_epoch, parts[7].partition_epoch - 1,
                               (1, 2))
        end = ctrl.raft.log.end_offset
        answers = await ctrl.alter_partitions(1, changes)
        assert isinstance(answers[7], errors.InvalidUpdateVersion)
        assert answers[:7] + answers[8:] == [None] * (partitions - 1)
        batches = list(ctrl.raft.log.committed_batches(end, ctrl.raft.log.end_offset))
        assert len(batches) == 1 and len(batches[0][1]) == partitions - 1
        isrs = {p: part.isr for p, part in ctrl.image.topics["t"].partitions.items()}
        assert isrs == {p: (1, 2, 3) if p == 7 else (1, 2) for p in range(partitions)}
        await _stop(ctrl)

    asyncio.run(run())


def test_a_heartbeat_is_answered_and_counted_while_a_decision_holds_the_lock(
        tmp_path: Path) -> None:
    """The bug: heartbeats queued behind a few hundred AlterPartitions on the decision lock
    until the controller fenced their brokers. A heartbeat that changes nothing needs no
    lock, and counts from its arrival."""
    async def run() -> None:
        ctrl = await _three_brokers(tmp_path)
        epoch = ctrl.image.brokers[2].epoch
        async with ctrl._lock.hold(NORMAL):   # an ISR or topic decision being committed
            before = time.monotonic()
            state = await asyncio.wait_for(
                ctrl.broker_heartbeat(2, epoch, ctrl.raft.applied_offset, False), 5)
            assert not state.fenced and state.caught_up
            assert ctrl._liveness.silence(2, time.monotonic()) <= time.monotonic() - before
            # A stale epoch is still refused without the lock.
            with pytest.raises(errors.StaleBrokerEpoch):
                await asyncio.wait_for(ctrl.broker_heartbeat(2, epoch - 1, 0, False), 5)
        await _stop(ctrl)

    asyncio.run(run())


class _Clock:
    """time.monotonic for the controller alone (asyncio keeps the real one)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now


def test_a_stalled_controller_judges_nobody_until_it_has_read_its_heartbeats(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Heartbeats that arrived while this process did not run (a long CPU burst) sit unread
    in socket buffers: the first fencing check after the stall fences nobody; the next one
    judges as usual, so a dead broker is still fenced."""
    async def run() -> None:
        ctrl = await _three_brokers(tmp_path)
        clock = _Clock()
        monkeypatch.setattr("rillet.controller.controller.time", clock)
        epochs = {b: ctrl.image.brokers[b].epoch for b in (1, 2, 3)}
        offset = ctrl.raft.applied_offset
        await ctrl.fence_expired_brokers()          # activates: everyone gets a session
        clock.now += 0.5
        await ctrl.fence_expired_brokers()
        clock.now += 15.0                           # the stall: past the 9 s session
        await ctrl.fence_expired_brokers()
        assert ctrl.image.live_broker_ids == {1, 2, 3}, "fenced right after a stall"
        clock.now += 0.1                            # what arrived meanwhile is read now
        for b in (1, 3):
            await ctrl.broker_heartbeat(b, epochs[b], offset, False)
        clock.now += 0.5
        await ctrl.fence_expired_brokers()
        assert ctrl.image.live_broker_ids == {1, 3}, "broker 2 sent nothing: fenced"
        await _stop(ctrl)

    asyncio.run(run())


def test_no_image_names_a_fenced_broker_as_a_leader(tmp_path: Path) -> None:
    """Fencing a broker (controlled shutdown, a new process registering) and moving its
    leaderships is one metadata batch, as in Kafka. The bug: two commits, and a Metadata
    answer between them named a fenced leader, which kafka-python 3.0.12 cannot recover from
    (issue 27)."""
    async def run() -> None:
        ctrl = await _three_brokers(tmp_path)
        [created] = await ctrl.create_topics([TopicSpec(
            "t", assignments={0: [2, 1, 3], 1: [3, 2, 1], 2: [2, 3, 1]})])
        assert created.error is None
        seen: list[tuple[int, str, int]] = []

        def watch(_: object, image) -> None:   # type: ignore[no-untyped-def]
            for topic in image.topics.values():
                seen.extend((p.leader, topic.name, n) for n, p in topic.partitions.items()
                            if p.leader != -1 and p.leader not in image.live_broker_ids)
        ctrl.on_change(watch)
        epoch = ctrl.image.brokers[2].epoch
        state = await ctrl.broker_heartbeat(2, epoch, ctrl.raft.applied_offset, True)
        assert state.should_shut_down
        await ctrl.register_broker(3, "127.0.0.1", 9095, None, "incarnation-3b")  # restarted
        assert ctrl.image.live_broker_ids == {1}
        assert {p.leader for p in ctrl.image.topics["t"].partitions.values()} == {1}
        assert seen == [], f"images named fenced leaders: {seen}"
        await _stop(ctrl)

    asyncio.run(run())


def test_a_heartbeat_naming_an_offline_log_dir_moves_leadership_off_its_replicas(
        tmp_path: Path) -> None:
    """KIP-858: the registration keeps the broker's online dir ids; a heartbeat naming one
    of them offline makes its replicas there LOST (leadership and ISR slot move off them),
    the ones in its other dir untouched, and a second such heartbeat changes nothing."""
    import uuid
    from rillet.metadata.directories import LOST
    bad, good = uuid.UUID(int=100), uuid.UUID(int=101)

    async def run() -> None:
        ctrl = await _three_brokers(tmp_path)
        epoch = await ctrl.register_broker(2, "127.0.0.1", 9094, None, "incarnation-2",
                                           log_dirs=(bad, good))
        assert ctrl.image.brokers[2].log_dirs == (bad, good)
        await ctrl.broker_heartbeat(2, epoch, ctrl.raft.applied_offset, False)
        [created] = await ctrl.create_topics([TopicSpec(
            "t", assignments={0: [2, 1, 3], 1: [2, 3, 1]})])
        assert created.error is None
        assert await ctrl.assign_replicas_to_dirs(2, epoch, {("t", 0): bad, ("t", 1): good}) \
            == {("t", 0): None, ("t", 1): None}
        assert {p.leader for p in ctrl.image.topics["t"].partitions.values()} == {2}

        state = await ctrl.broker_heartbeat(2, epoch, ctrl.raft.applied_offset, False,
                                            frozenset({bad}))
        assert not state.fenced   # the broker stays: its other dir is served
        on_bad, on_good = ctrl.image.partition("t", 0), ctrl.image.partition("t", 1)
        assert on_bad is not None and on_good is not None
        assert on_bad.leader == 1 and 2 not in on_bad.isr and on_bad.directory_of(2) == LOST
        assert on_good.leader == 2 and on_good.directory_of(2) == good
        end = ctrl.raft.log.end_offset
        await ctrl.broker_heartbeat(2, epoch, ctrl.raft.applied_offset, False,
                                    frozenset({bad}))
        assert ctrl.raft.log.end_offset == end, "a repeated offline dir was recorded again"
        await _stop(ctrl)

    asyncio.run(run())
