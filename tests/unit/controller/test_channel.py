"""ControllerChannel: the local-or-RPC choice and its one leader lookup (no sockets: the
calls that would leave the node are refused before any connection). Version negotiation
over loopback sockets: tests/unit/controller/test_channel_versions.py."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rillet.defs.broker_config import Voter
from rillet.controller.channel import ControllerChannel
from rillet.controller.isr import IsrAnswer, IsrChange
from rillet.controller.topics import TopicResult, TopicSpec
from rillet.metadata.image import MetadataImage
from rillet.metadata.view import MetadataView
from rillet.protocol import errors


class FakeRaft:
    def __init__(self, leader_id: int | None, node_id: int = 1) -> None:
        self.leader_id = leader_id
        self.is_leader = leader_id == node_id
        self.voters = {1: Voter(1, "127.0.0.1", 1), 2: Voter(2, "127.0.0.1", 2)}

    async def wait_for(self, predicate: Any, timeout: float) -> bool:
        return predicate()


class FakeController:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False
                            ) -> list[TopicResult]:
        self.calls.append("create_topics")
        return [TopicResult(s.name) for s in specs]

    async def alter_partitions(self, leader_id: int, changes: list[IsrChange]
                               ) -> list[IsrAnswer]:
        self.calls.append("alter_partitions")
        return [None for _ in changes]


CHANGE = IsrChange("t", 0, 0, 0, (1,))


def _channel(leader_id: int | None) -> tuple[ControllerChannel, FakeController]:
    controller = FakeController()
    view = MetadataView(lambda: MetadataImage(cluster_id="c"))
    channel = ControllerChannel(1, "c", FakeRaft(leader_id),  # type: ignore[arg-type]
                                controller, view, None, 1.0)  # type: ignore[arg-type]
    return channel, controller


def test_the_quorum_leader_calls_its_own_controller() -> None:
    channel, controller = _channel(leader_id=1)
    assert channel.is_local and channel.leader() is None
    results = asyncio.run(channel.create_topics([TopicSpec("t")]))
    answers = asyncio.run(channel.alter_partitions(1, [CHANGE]))
    assert [r.name for r in results] == ["t"] and results[0].error is None
    assert answers == [None]
    assert controller.calls == ["create_topics", "alter_partitions"]


def test_another_node_asks_the_leader_it_knows() -> None:
    channel, controller = _channel(leader_id=2)
    assert not channel.is_local
    assert channel.leader() == Voter(2, "127.0.0.1", 2)
    # Not a topic this node knows: answered (to be asked again) before anything is sent.
    [answer] = asyncio.run(channel.alter_partitions(1, [CHANGE]))
    assert isinstance(answer, errors.NotController)
    assert controller.calls == []


def test_without_a_leader_the_calls_answer_not_controller() -> None:
    channel, controller = _channel(leader_id=None)
    assert not channel.is_local and channel.leader() is None
    [result] = asyncio.run(channel.create_topics([TopicSpec("t")]))
    assert isinstance(result.error, errors.NotController)
    with pytest.raises(errors.NotController):
        asyncio.run(channel.request(63, (0, 1), {}))
    assert controller.calls == []


def test_a_leader_outside_the_voters_is_no_leader() -> None:
    channel, _ = _channel(leader_id=7)
    assert channel.leader() is None and not channel.is_local
