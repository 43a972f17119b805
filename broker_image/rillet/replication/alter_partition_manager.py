"""This broker's ISR changes on their way to the active controller (Kafka's
AlterPartitionManager).

The ReplicaManager decides that a partition it leads needs a new ISR (leader.py) and
submits the change here. One AlterPartition request is in flight at a time; it carries
every change queued when it leaves, over all topics and partitions, and the next one
carries everything submitted meanwhile. So a broker catching up on a few thousand
partitions costs the controller a few requests and metadata commits, not one each (the
controller fenced healthy brokers while it worked through one AlterPartition per
partition).

Each partition's answer is handled on its own:
- accepted: nothing to do here; the change takes effect when the committed metadata
  reaches this broker, like every other metadata change;
- refused for good (a stale leader or partition epoch, an ineligible replica, ...):
  handed back to the owner (`on_refused`) after a short backoff, so the newer metadata that
  is the usual reason has time to arrive before the leader proposes again;
- no answer known (no controller, a timeout, a commit that may or may not have happened):
  queued again after the backoff, for as long as the leader still wants that very change
  (`is_current`); the high watermark keeps counting a joiner meanwhile (leader.py).

Owned by the ReplicaManager; event loop only.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from ..controller.isr import IsrAnswer, IsrChange, TopicPartition
from ..protocol import errors
from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)
RETRY_BACKOFF_S = 0.5
# The controller's own "no" to a change: asking again cannot help.
REJECTIONS = (errors.FencedLeaderEpoch, errors.InvalidUpdateVersion, errors.InvalidRequest,
              errors.IneligibleReplica, errors.UnknownTopicOrPartition, errors.UnknownTopicId)
# Of those, the ones that prove the change was not committed. A stale epoch or an unknown
# partition can also answer a change asked again after its first answer was lost, when that
# first attempt did commit: only the metadata says which ISR holds (Kafka's
# Partition.handleAlterPartitionError keeps its pending state for those, too).
NOT_COMMITTED = (errors.IneligibleReplica, errors.InvalidRequest)


def proves_not_committed(error: Exception) -> bool:
    return isinstance(error, NOT_COMMITTED)


class IsrChannel(Protocol):
    """Where ISR changes go: the active controller (controller/channel.py)."""

    async def alter_partitions(self, leader_id: int, changes: list[IsrChange]
                               ) -> list[IsrAnswer]: ...


@dataclass
class Settled:
    """What one request's answers mean for its changes."""
    accepted: list[IsrChange] = field(default_factory=list)
    refused: list[tuple[IsrChange, errors.KafkaError]] = field(default_factory=list)
    retry: list[IsrChange] = field(default_factory=list)


def settle(changes: Sequence[IsrChange], answers: Sequence[IsrAnswer | Exception]
           ) -> Settled:
    """Sort a request's changes by their answers (one per change, in order)."""
    out = Settled()
    for change, answer in zip(changes, answers, strict=True):
        if answer is None:
            out.accepted.append(change)
        elif isinstance(answer, REJECTIONS):
            out.refused.append((change, answer))
        else:
            out.retry.append(change)
    return out


class AlterPartitionManager:
    def __init__(self, node_id: int, is_current: Callable[[IsrChange], bool],
                 on_refused: Callable[[IsrChange, errors.KafkaError], None],
                 backoff_s: float = RETRY_BACKOFF_S) -> None:
        """`is_current(change)`: the leader still wants exactly this change;
        `on_refused(change, error)`: the controller said no to it for good."""
        self._node_id = node_id
        self._is_current = is_current
        self._on_refused = on_refused
        self._backoff_s = backoff_s
        self._channel: IsrChannel | None = None
        self._queued: dict[TopicPartition, IsrChange] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._later: set[asyncio.TimerHandle] = set()
        # What was sent, for metrics and benchmarks: requests (local calls included) and
        # the partition changes they carried.
        self.requests_sent = 0
        self.changes_sent = 0

    def attach(self, channel: IsrChannel) -> None:
        self._channel = channel

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        await cancel_and_wait([self._task])

    def submit(self, change: IsrChange) -> None:
        """Queue `change` for the next request (replacing one queued for that partition)."""
        self._queued[change.tp] = change
        self._wake.set()

    @property
    def queued(self) -> int:
        return len(self._queued)

    def take(self) -> list[IsrChange]:
        """Everything queued that the leader still wants, for one request."""
        batch = [c for c in self._queued.values() if self._is_current(c)]
        self._queued.clear()
        return batch

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = self.take()
            if not batch:
                continue
            settled = settle(batch, await self._send(batch))
            for change, error in settled.refused:
                self._hand_back_later(change, error)
            if settled.retry:
                await asyncio.sleep(self._backoff_s)
                for change in settled.retry:
                    # A change submitted meanwhile for that partition is the newer wish.
                    self._queued.setdefault(change.tp, change)
                self._wake.set()

    async def _send(self, batch: list[IsrChange]) -> Sequence[IsrAnswer | Exception]:
        self.requests_sent += 1
        self.changes_sent += len(batch)
        log.info("proposing ISR changes for %d partition(s) in one AlterPartition",
                 len(batch))
        try:
            if self._channel is None:
                raise errors.NotController("no controller channel yet")
            answers = await self._channel.alter_partitions(self._node_id, batch)
        except Exception as exc:
            # The request as a whole got no answer: every change's outcome is unknown.
            log.info("AlterPartition of %d partition(s) not answered: %r", len(batch), exc)
            return [exc] * len(batch)
        unknown = sum(1 for a in answers if a is not None and not isinstance(a, REJECTIONS))
        refused = [f"{c.topic}-{c.partition}: {type(a).__name__}"
                   for c, a in zip(batch, answers) if isinstance(a, REJECTIONS)]
        if refused or unknown:
            log.info("AlterPartition: %d refused (%s), %d to ask again", len(refused),
                     ", ".join(refused[:5]), unknown)
        return answers

    def _hand_back_later(self, change: IsrChange, error: errors.KafkaError) -> None:
        def hand_back() -> None:
            self._later.discard(handle)
            self._on_refused(change, error)
        handle = asyncio.get_running_loop().call_later(self._backoff_s, hand_back)
        self._later.add(handle)
