"""replication/alter_partition_manager.py: every queued ISR change in one AlterPartition,
one request in flight, answers handled per partition (a fake controller channel; no
sockets, no clock: the backoff is zero and waits are on conditions, bounded)."""
from __future__ import annotations

import asyncio
from typing import Callable

from rillet.controller.isr import IsrAnswer, IsrChange
from rillet.protocol import errors
from rillet.replication.alter_partition_manager import (AlterPartitionManager,
                                                      proves_not_committed, settle)

BOUND_S = 5.0


def _change(p: int, topic: str = "t", isr: tuple[int, ...] = (1, 2, 3)) -> IsrChange:
    return IsrChange(topic, p, 0, 0, isr)


class FakeChannel:
    """Holds each request until the test answers it."""

    def __init__(self) -> None:
        self.requests: list[list[IsrChange]] = []
        self._answers: list[asyncio.Future[list[IsrAnswer]]] = []

    async def alter_partitions(self, leader_id: int, changes: list[IsrChange]
                               ) -> list[IsrAnswer]:
        assert leader_id == 1
        self.requests.append(list(changes))
        answer: asyncio.Future[list[IsrAnswer]] = asyncio.get_running_loop().create_future()
        self._answers.append(answer)
        return await answer

    def answer(self, i: int, answers: list[IsrAnswer] | Exception) -> None:
        if isinstance(answers, Exception):
            self._answers[i].set_exception(answers)
        else:
            self._answers[i].set_result(answers)


async def _until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0)
    await asyncio.wait_for(poll(), BOUND_S)


class Leader:
    """The owner's side: which changes it still wants, and what was handed back."""

    def __init__(self) -> None:
        self.wanted: set[IsrChange] = set()
        self.refused: list[tuple[IsrChange, errors.KafkaError]] = []

    def manager(self, channel: FakeChannel | None) -> AlterPartitionManager:
        m = AlterPartitionManager(1, lambda c: c in self.wanted,
                                  lambda c, e: self.refused.append((c, e)), backoff_s=0)
        if channel is not None:
            m.attach(channel)
        return m

    def want(self, m: AlterPartitionManager, *changes: IsrChange) -> None:
        for c in changes:
            self.wanted.add(c)
            m.submit(c)


def _started() -> tuple[FakeChannel, Leader, AlterPartitionManager]:
    channel, leader = FakeChannel(), Leader()
    m = leader.manager(channel)
    m.start()
    return channel, leader, m


def test_changes_queued_while_a_request_is_in_flight_go_in_the_next_one() -> None:
    async def run() -> None:
        channel, leader, m = _started()
        leader.want(m, *(_change(p) for p in range(3)), _change(0, topic="u"))
        await _until(lambda: len(channel.requests) == 1)
        leader.want(m, *(_change(p) for p in range(3, 8)))
        await asyncio.sleep(0)
        assert len(channel.requests) == 1, "a second request while the first is in flight"
        channel.answer(0, [None] * 4)
        await _until(lambda: len(channel.requests) == 2)
        assert [c.tp for c in channel.requests[0]] == [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
        assert [c.partition for c in channel.requests[1]] == [3, 4, 5, 6, 7]
        channel.answer(1, [None] * 5)
        await _until(lambda: m.queued == 0)
        assert (m.requests_sent, m.changes_sent) == (2, 9)
        await m.stop()

    asyncio.run(run())


def test_each_partition_answer_is_handled_on_its_own() -> None:
    async def run() -> None:
        channel, leader, m = _started()
        accepted, stale, unknown = _change(0), _change(1), _change(2)
        leader.want(m, accepted, stale, unknown)
        await _until(lambda: len(channel.requests) == 1)
        channel.answer(0, [None, errors.InvalidUpdateVersion("stale"),
                           errors.RequestTimedOut("not committed in time")])
        # Only the change whose outcome is unknown is asked again.
        await _until(lambda: len(channel.requests) == 2)
        assert channel.requests[1] == [unknown]
        await _until(lambda: len(leader.refused) == 1)
        assert leader.refused[0][0] == stale
        assert isinstance(leader.refused[0][1], errors.InvalidUpdateVersion)
        channel.answer(1, [None])
        await m.stop()

    asyncio.run(run())


def test_a_request_without_an_answer_is_asked_again_with_whatever_came_meanwhile() -> None:
    async def run() -> None:
        channel, leader, m = _started()
        first = [_change(p) for p in range(3)]
        leader.want(m, *first)
        await _until(lambda: len(channel.requests) == 1)
        leader.want(m, _change(9))
        channel.answer(0, errors.NotController("leader moved"))
        await _until(lambda: len(channel.requests) == 2)
        assert sorted(c.partition for c in channel.requests[1]) == [0, 1, 2, 9]
        channel.answer(1, [None] * 4)
        await m.stop()
        assert leader.refused == []

    asyncio.run(run())


def test_a_change_the_leader_no_longer_wants_is_not_sent() -> None:
    async def run() -> None:
        channel, leader, m = _started()
        leader.want(m, _change(0))
        await _until(lambda: len(channel.requests) == 1)
        leader.want(m, _change(1), _change(2))
        leader.wanted.discard(_change(1))    # committed metadata answered it meanwhile
        channel.answer(0, errors.RequestTimedOut("no quorum"))
        leader.wanted.discard(_change(0))    # and this one too
        await _until(lambda: len(channel.requests) == 2)
        assert channel.requests[1] == [_change(2)]
        channel.answer(1, [None])
        await m.stop()

    asyncio.run(run())


def test_without_a_channel_nothing_is_lost() -> None:
    async def run() -> None:
        leader = Leader()
        m = leader.manager(None)
        m.start()
        leader.want(m, _change(0))
        await _until(lambda: m.requests_sent >= 2)   # retried, not dropped
        channel = FakeChannel()
        m.attach(channel)
        await _until(lambda: len(channel.requests) == 1)
        assert channel.requests[0] == [_change(0)]
        channel.answer(0, [None])
        await m.stop()

    asyncio.run(run())


def test_settle_sorts_answers_into_accepted_refused_and_retried() -> None:
    changes = [_change(p) for p in range(4)]
    out = settle(changes, [None, errors.FencedLeaderEpoch("x"), errors.NotController("y"),
                           OSError("connection reset")])
    assert out.accepted == changes[:1]
    assert [c for c, _ in out.refused] == changes[1:2]
    assert out.retry == changes[2:]


def test_only_a_refusal_that_proves_nothing_committed_drops_the_pending_isr() -> None:
    """A change asked again after a lost answer may already be committed: the controller then
    answers a stale partition epoch or leader epoch, and the leader must keep counting the
    joiner until the metadata says (else its high watermark could pass a replica that is in
    the controller's ISR and may be elected)."""
    assert proves_not_committed(errors.IneligibleReplica("fenced broker"))
    assert proves_not_committed(errors.InvalidRequest("named twice"))
    for stale in (errors.InvalidUpdateVersion("epoch 6, not 5"),
                  errors.FencedLeaderEpoch("epoch 3"),
                  errors.UnknownTopicOrPartition("t-0")):
        assert not proves_not_committed(stale)
