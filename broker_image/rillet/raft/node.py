"""The Raft I/O shell: turns the pure core's effects into fsyncs and quorum RPCs.

One asyncio lock serialises every call into the core together with the
effects it returns, so a Persist (quorum-state fsync) always completes before
the response or request that follows it leaves, and no two steps interleave.
Sends, log flushes and snapshot loads run as tasks that report back through
`step`. Committed batches are handed, in order and once, to `on_commit`
(the controller replays them into the metadata image).

The node knows nothing of what it replicates: its owner gives it the log (a
ReplicatedLog), the name of the topic its RPCs are about, and the voters' addresses.

A follower's Fetch is long-polled here, not in the core: an answer with
nothing new waits (up to the request's max wait) for the log, the high
watermark or the epoch to move, so followers learn of commits at once. An
answer whose high watermark that follower has not been told yet is news and
leaves at once (raft/parking.py says why).
"""
from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, ContextManager, Mapping, Protocol, TypeVar

from ..client.connection import BrokerConnection, KafkaClientError
from ..protocol import errors
from . import messages as m
from . import rpc
from .core import RaftCore
from .log import CommittedBatch, ReplicatedLog
from .parking import FetchParking
from .quorum_state import QuorumStateFile
from .roles import NotLeader, RaftTiming, ReplicaProgress

log = logging.getLogger(__name__)
T = TypeVar("T")

TICK_S = 0.05
FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.05


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class VoterAddress(Protocol):
    """Where a voter's controller listener is; rillet.defs' Voter (the parsed
    controller.quorum.voters) is one."""

    @property
    def node_id(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


@dataclass
class _Proposal:
    """An append waiting to be committed: the future resolved with its offset."""
    last_offset: int
    epoch: int
    done: asyncio.Future[int]


@dataclass(frozen=True)
class QuorumInfo:
    """What DescribeQuorum reports (the leader's view of every replica)."""
    leader_id: int | None
    epoch: int
    high_watermark: int
    log_end_offset: int
    voters: tuple[int, ...]
    progress: dict[int, ReplicaProgress]
    observers: dict[int, ReplicaProgress]


class RaftNode:
    """Owns the core, the quorum-state file and the replication of the log it is given
    (partition 0 of `topic`)."""

    def __init__(self, node_id: int, voters: Mapping[int, VoterAddress], cluster_id: str,
                 replicated_log: ReplicatedLog, topic: str, state_file: QuorumStateFile,
                 timing: RaftTiming, on_commit: Callable[[list[CommittedBatch]], None],
                 load_snapshot: Callable[[int, int, int], Awaitable[bool]] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self._ssl_context = ssl_context  # the controller listener's, when it is SSL
        self.voters = voters
        self.cluster_id = cluster_id
        self.log = replicated_log
        self.topic = topic
        self._state_file = state_file
        self._timing = timing
        self._on_commit = on_commit
        self._load_snapshot_fn = load_snapshot
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._connections: dict[tuple[int, str], BrokerConnection] = {}
        self._proposals: list[_Proposal] = []
        self._changed = asyncio.Event()
        self._last_seen: tuple[Any, ...] = ()
        # A replica quiet for two fetch waits may have restarted: tell it the HW again.
        self._parking = FetchParking(forget_after_ms=2 * FETCH_MAX_WAIT_MS)
        snapshot = replicated_log.snapshot()
        self.applied_offset = max(replicated_log.start_offset, snapshot[0] if snapshot else 0)
        self.core: RaftCore | None = None
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        state = self._state_file.read()
        self.core = RaftCore(self.node_id, frozenset(self.voters), self.log, state, now_ms(),
                             random.Random(), self._timing)
        self.applied_offset = max(self.applied_offset, self.core.high_watermark)
        self._spawn(self._tick_loop())
        await self.step(m.Tick())

    async def stop(self) -> None:
        """Hand leadership over (EndQuorumEpoch) if we lead, then stop every task."""
        if self.core is not None and self.core.is_leader:
            async with self._lock:
                before = set(self._tasks)
                await self._run(self.core.resign(now_ms()))
                sends = self._tasks - before
            # Give the EndQuorumEpoch requests a moment to leave; not a condition to wait on.
            if sends:
                await asyncio.wait(sends, timeout=1)
        async with self._lock:
            self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        for conn in self._connections.values():
            await conn.close()
        self._fail_proposals(errors.NotController("this node is shutting down"))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            log.error("raft task failed", exc_info=task.exception())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            await self.step(m.Tick())

    # -- queries ------------------------------------------------------------------------

    @property
    def _c(self) -> RaftCore:
        assert self.core is not None, "raft node not started"
        return self.core

    @property
    def leader_id(self) -> int | None:
        return self._c.leader_id

    @property
    def epoch(self) -> int:
        return self._c.epoch

    @property
    def is_leader(self) -> bool:
        return self.core is not None and self.core.is_leader

    @property
    def is_active(self) -> bool:
        """Leader with everything before its epoch applied: its image is current."""
        c = self.core
        return c is not None and c.is_leader and self.applied_offset > c.epoch_start_offset

    def quorum_info(self) -> QuorumInfo:
        c = self._c
        return QuorumInfo(c.leader_id, c.epoch, c.high_watermark, self.log.end_offset,
                          tuple(sorted(self.voters)), c.replica_progress(),
                          c.observer_progress())

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """True once predicate() holds (re-checked on every state change), False at timeout."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            event = self._changed
            try:
                await asyncio.wait_for(event.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass
        return True

    # -- stepping the core ----------------------------------------------------------------

    async def step(self, message: Any, sender: int | None = None) -> None:
        async with self._lock:
            if self._stopping:
                return   # the log may be closed under us: nothing more reaches the core
            await self._run(self._c.step(message, now_ms(), sender))
            self._after_step()

    async def handle(self, sender: int, request: m.Request, max_wait_ms: int = 0,
                     wait_guard: Callable[[], ContextManager[None]] = nullcontext
                     ) -> m.Response:
        """Answer a quorum request from `sender` (a Fetch may be long-polled, inside
        `wait_guard()`: the listener's, which ends the wait when the fetcher hangs up)."""
        response = await self._handle_once(sender, request)
        if not isinstance(request, m.FetchRequest):
            return response
        assert isinstance(response, m.FetchResponse)
        if max_wait_ms > 0 and self._nothing_new(request, response) \
                and not self._parking.has_news(sender, response.epoch, request.fetch_offset,
                                               response.high_watermark, now_ms()):
            seen = (self._c.epoch, self._c.high_watermark, self.log.end_offset)
            with wait_guard():
                await self.wait_for(
                    lambda: (self._c.epoch, self._c.high_watermark, self.log.end_offset)
                    != seen, max_wait_ms / 1000)
            response = await self._handle_once(sender, request)
            assert isinstance(response, m.FetchResponse)
        if response.error == m.NONE:
            self._parking.answered(sender, response.epoch, request.fetch_offset,
                                   response.high_watermark, now_ms())
        return response

    async def _handle_once(self, sender: int, request: m.Request) -> m.Response:
        async with self._lock:
            if self._stopping:
                raise errors.NotController("this node is shutting down")
            response, effects = self._c.handle_request(sender, request, now_ms())
            await self._run(effects)
            self._after_step()
            return response

    @staticmethod
    def _nothing_new(request: m.FetchRequest, response: m.Response) -> bool:
        assert isinstance(response, m.FetchResponse)
        return (response.error == m.NONE and not response.records
                and response.diverging_end_offset < 0 and response.snapshot_end_offset < 0)

    async def propose(self, records: list[dict[str, Any]], timeout: float = 30.0) -> int:
        """Append one batch as leader; returns its last offset once committed and applied."""
        async with self._lock:
            if self._stopping:
                raise errors.NotController("this node is shutting down")
            try:
                last, effects = self._c.propose(records, now_ms())
            except NotLeader as exc:
                raise errors.NotController(str(exc)) from None
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._proposals.append(_Proposal(last, self._c.epoch, done))
            await self._run(effects)
            self._after_step()
        try:
            return await asyncio.wait_for(asyncio.shield(done), timeout)
        except asyncio.TimeoutError:
            raise errors.RequestTimedOut(
                f"metadata change not committed within {timeout:.0f}s (no quorum?)") from None

    async def _run(self, effects: list[m.Effect]) -> None:
        for effect in effects:
            if isinstance(effect, m.Persist):
                await asyncio.to_thread(self._state_file.write, effect.state)
            elif isinstance(effect, m.Send):
                self._spawn(self._send(effect.to, effect.message))
            elif isinstance(effect, m.Flush):
                self._spawn(self._flush())
            elif isinstance(effect, m.LoadSnapshot):
                self._spawn(self._load_snapshot(effect))

    def _after_step(self) -> None:
        c = self._c
        hw = c.high_watermark
        self.log.set_high_watermark(hw)
        if hw > self.applied_offset:
            # All at once: a node catching up on thousands of batches replays them into one
            # new image and tells the listeners once, not once per batch.
            batches = list(self.log.committed_batches(self.applied_offset, hw))
            if batches:
                self._on_commit(batches)
            self.applied_offset = max(self.applied_offset, hw)
        self._settle_proposals()
        seen = (c.epoch, c.leader_id, hw, self.log.end_offset, c.role)
        if seen != self._last_seen:
            if self._last_seen and seen[:2] != self._last_seen[:2]:
                log.info("quorum epoch %d, leader %s (this node %d is %s)", c.epoch,
                         c.leader_id, self.node_id, c.role)
            self._last_seen = seen
            self._changed.set()
            self._changed = asyncio.Event()

    def _settle_proposals(self) -> None:
        c = self._c
        keep = []
        for p in self._proposals:
            if p.done.done():
                continue
            if p.last_offset < self.applied_offset and p.epoch == c.epoch and c.is_leader:
                p.done.set_result(p.last_offset)
            elif p.epoch != c.epoch or not c.is_leader:
                p.done.set_exception(errors.NotController(
                    f"leadership moved (epoch {c.epoch}) before the change was committed"))
            else:
                keep.append(p)
        self._proposals = keep

    def _fail_proposals(self, exc: Exception) -> None:
        for p in self._proposals:
            if not p.done.done():
                p.done.set_exception(exc)
        self._proposals = []

    # -- effects that run on their own ----------------------------------------------------

    async def _flush(self) -> None:
        end = await self.log.flush()
        await self.step(m.Flushed(end))

    async def _load_snapshot(self, effect: m.LoadSnapshot) -> None:
        ok = False
        if self._load_snapshot_fn is not None:
            try:
                ok = await self._load_snapshot_fn(effect.leader_id, effect.end_offset,
                                                  effect.epoch)
            except Exception:
                log.exception("loading snapshot %d-%d from node %d failed", effect.end_offset,
                              effect.epoch, effect.leader_id)
        if ok:
            self.applied_offset = max(self.applied_offset, effect.end_offset)
            await self.step(m.SnapshotLoaded(effect.end_offset, effect.epoch))
        else:
            await asyncio.sleep(RETRY_BACKOFF_S * 10)
            await self.step(m.SnapshotLoaded(-1, -1))

    def connection(self, to: int, kind: str = "control") -> BrokerConnection:
        key = (to, kind)
        conn = self._connections.get(key)
        if conn is None:
            voter = self.voters[to]
            timeout = self._timing.request_timeout_ms / 1000
            if kind == "fetch":
                timeout += FETCH_MAX_WAIT_MS / 1000
            conn = BrokerConnection(voter.host, voter.port, client_id=f"raft-{self.node_id}",
                                    timeout=timeout, ssl_context=self._ssl_context)
            self._connections[key] = conn
        return conn

    async def _send(self, to: int, message: m.Request) -> None:
        kind = "fetch" if isinstance(message, m.FetchRequest) else "control"
        api_key, body = rpc.encode_request(message, self.cluster_id, self.topic,
                                           FETCH_MAX_WAIT_MS, self._timing.max_fetch)
        try:
            raw = await self.connection(to, kind).request(api_key, rpc.VERSIONS[api_key], body)
            response = rpc.decode_response(message, raw)
        except (KafkaClientError, OSError, asyncio.TimeoutError) as exc:
            log.debug("quorum request to node %d failed: %s", to, exc)
            response = -1
        if isinstance(response, int):
            if response == rpc.INCONSISTENT_CLUSTER_ID:
                log.error("node %d refused our quorum request: it belongs to another "
                          "cluster (ours is %s)", to, self.cluster_id)
            # Do not hammer a node that is down: the core retries as soon as it is told.
            await asyncio.sleep(RETRY_BACKOFF_S)
            await self.step(m.RequestFailed(to, message))
            return
        await self.step(response, sender=to)
