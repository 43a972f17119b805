"""GroupCoordinator over real PartitionLogs (tmp_path): persistence, reload, expiry.

The broker around it is a minimal stand-in with a real metadata image and a
real LogManager, so what is appended to __consumer_offsets is exactly what a
restart replays.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rillet.coordinator.group_types import GroupState, JoinRequest
from rillet.coordinator.group_metadata import OFFSETS_TOPIC
from rillet.coordinator.manager import CommitEntry, GroupCoordinator
from rillet.protocol import errors
from rillet.storage.log_config import LogConfig
from tests.unit import standin_broker

PARTITIONS = 3
Clock = standin_broker.Clock


class StandInBroker(standin_broker.StandInBroker):
    def __init__(self, data: Path, **config: str) -> None:
        super().__init__(data, {OFFSETS_TOPIC: PARTITIONS, "t": 2}, (OFFSETS_TOPIC,),
                         LogConfig(cleanup_policy="compact"),
                         **{"offsets.topic.num.partitions": str(PARTITIONS), **config})


def join(coord: GroupCoordinator, group: str, member: str = "",
         instance: str | None = None) -> Any:
    return coord.join_group(group, JoinRequest(member, instance, "client", "/127.0.0.1", 6000,
                                               10000, "consumer", [("range", b"sub")], False))


def test_offsets_and_stable_group_survive_a_restart(tmp_path: Path) -> None:
    clock = Clock()

    async def first_life() -> tuple[str, int]:
        broker = StandInBroker(tmp_path, **{"group.initial.rebalance.delay.ms": "0"})
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        result = await join(coord, "g")
        sync = await coord.sync_group("g", result.member_id, None, result.generation_id, None,
                                      None, {result.member_id: b"assignment"})
        assert sync.assignment == b"assignment"
        codes = await coord.commit_offsets("g", result.member_id, None, result.generation_id,
                                           -1, [CommitEntry("t", 0, 42, 3, "meta"),
                                                CommitEntry("t", 1, 7, -1, None),
                                                CommitEntry("missing", 0, 1, -1, None)])
        assert codes == {("t", 0): 0, ("t", 1): 0,
                         ("missing", 0): errors.UnknownTopicOrPartition.code}
        await coord.commit_offsets("g", result.member_id, None, result.generation_id, -1,
                                   [CommitEntry("t", 0, 43, 3, "later")])
        await coord.stop()
        await broker.logs.close()
        return result.member_id, result.generation_id

    async def second_life(member: str, generation: int) -> None:
        broker = StandInBroker(tmp_path)
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        offsets = coord.fetch_offsets("g", [("t", [0, 1, 2])])
        assert (offsets[("t", 0)].offset, offsets[("t", 0)].metadata) == (43, "later")
        assert offsets[("t", 0)].leader_epoch == 3 and offsets[("t", 1)].offset == 7
        assert offsets[("t", 2)] is None
        group = coord.describe_group("g")
        assert group is not None and group.state == GroupState.STABLE
        assert group.generation_id == generation and list(group.members) == [member]
        assert group.members[member].assignment == b"assignment"
        # The member keeps going after the restart without rejoining.
        assert coord.heartbeat("g", member, None, generation) == 0
        await coord.stop()
        await broker.logs.close()

    member, generation = asyncio.run(first_life())
    asyncio.run(second_life(member, generation))


def test_offsets_of_an_empty_group_expire_and_the_group_goes(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        broker = StandInBroker(tmp_path, **{"offsets.retention.minutes": "1"})
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        await coord.commit_offsets("standalone", "", None, -1, -1, [CommitEntry("t", 0, 5, -1,
                                                                                None)])
        clock.now += 30
        assert coord.expire_offsets(coord.now()) == 0
        # An explicit retention (OffsetCommit v2-4) wins over the broker default.
        await coord.commit_offsets("short", "", None, -1, 10_000, [CommitEntry("t", 0, 1, -1,
                                                                               None)])
        clock.now += 11
        assert coord.expire_offsets(coord.now()) == 1
        assert "short" not in coord.groups
        clock.now += 30
        assert coord.expire_offsets(coord.now()) == 1
        assert coord.groups == {}
        assert coord.fetch_offsets("standalone", [("t", [0])]) == {("t", 0): None}
        await coord.stop()
        await broker.logs.close()
        # The tombstones are what a restart sees.
        again = StandInBroker(tmp_path)
        reloaded = GroupCoordinator(again, clock)
        await reloaded.start()
        assert reloaded.groups == {}
        await reloaded.stop()
        await again.logs.close()

    asyncio.run(scenario())


def test_delete_group_writes_tombstones(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        broker = StandInBroker(tmp_path)
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        await coord.commit_offsets("doomed", "", None, -1, -1, [CommitEntry("t", 1, 9, -1, None)])
        with pytest.raises(errors.GroupIdNotFound):
            coord.delete_group("never")
        coord.delete_group("doomed")
        await coord.stop()
        await broker.logs.close()
        again = StandInBroker(tmp_path)
        reloaded = GroupCoordinator(again, clock)
        await reloaded.start()
        assert "doomed" not in reloaded.groups
        await reloaded.stop()
        await again.logs.close()

    asyncio.run(scenario())


def test_not_coordinator_and_invalid_group(tmp_path: Path) -> None:
    broker = StandInBroker(tmp_path)
    coord = GroupCoordinator(broker, Clock())
    with pytest.raises(errors.CoordinatorLoadInProgress):
        coord.check_coordinator("g")  # not loaded yet
    coord.loaded.update(range(PARTITIONS))
    with pytest.raises(errors.InvalidGroupId):
        coord.check_coordinator("")
    assert coord.check_coordinator("g") == coord.partition_for("g")
    asyncio.run(broker.logs.close())


def test_expiry_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    """Memory never runs ahead of the log: a refused tombstone append keeps the offsets."""
    from dataclasses import replace

    from rillet.coordinator.records import group_partition
    clock = Clock()

    async def scenario() -> None:
        broker = StandInBroker(tmp_path, **{"offsets.retention.minutes": "1"})
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        await coord.commit_offsets("g", "", None, -1, -1, [CommitEntry("t", 0, 5, -1, None)])
        plog = broker.logs.get(OFFSETS_TOPIC, group_partition("g", PARTITIONS))
        roomy = plog.config
        plog.update_config(replace(roomy, max_message_bytes=10))  # every append is refused
        clock.now += 61
        assert coord.expire_offsets(coord.now()) == 0
        assert coord.fetch_offsets("g", [("t", [0])])[("t", 0)].offset == 5
        plog.update_config(roomy)
        assert coord.expire_offsets(coord.now()) == 1
        assert coord.groups == {}
        await coord.stop()
        await broker.logs.close()

    asyncio.run(scenario())


def test_undecodable_record_is_skipped_on_load(tmp_path: Path) -> None:
    from rillet.coordinator.records import group_partition, offset_key
    from rillet.records import Record, encode_batch, parse_batches
    clock = Clock()

    async def scenario() -> None:
        broker = StandInBroker(tmp_path)
        coord = GroupCoordinator(broker, clock)
        await coord.start()
        await coord.commit_offsets("g", "", None, -1, -1, [CommitEntry("t", 0, 5, -1, None)])
        # Garbage value under a valid key, appended to the group's partition.
        plog = broker.logs.get(OFFSETS_TOPIC, group_partition("g", PARTITIONS))
        data = bytearray(encode_batch([Record(0, 0, offset_key("g", "t", 1), b"\x00")]))
        plog.append(data, parse_batches(data), leader_epoch=0)
        await coord.stop()
        await broker.logs.close()
        again = StandInBroker(tmp_path)
        reloaded = GroupCoordinator(again, clock)
        await reloaded.start()
        found = reloaded.fetch_offsets("g", [("t", [0, 1])])
        assert found[("t", 0)].offset == 5 and found[("t", 1)] is None
        await reloaded.stop()
        await again.logs.close()

    asyncio.run(scenario())
