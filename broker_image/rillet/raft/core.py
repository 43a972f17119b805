"""The Raft core: KRaft's pull-based Raft as pure logic.

No sockets, clock or disk. The shell (raft.node, or raft.sim in tests) feeds
it requests, responses, ticks and flush completions with the current time,
and carries out the effects it returns, in order:

  Persist   fsync the quorum state (epoch, voted-for, leader) before anything
            that follows it, so a vote or an epoch is never answered unfsynced
  Send      a request to another voter; its response comes back through step()
  Flush     fsync the log, then step(Flushed(end)); a replica's progress, and so
            the high watermark, only ever counts flushed entries
  LoadSnapshot  the leader no longer has our offset: fetch its snapshot

Roles follow KRaft. The core is split by concern, one class per module, joined here:
  raft.roles            the state each role keeps, the timing
  raft.transitions      the quorum state and the moves between roles (RoleTransitions)
  raft.election         timers, votes, epochs: who leads (Election)
  raft.log_replication  Fetch on both sides, high watermark, flushes, snapshots
                        (LogReplication)
RaftCore adds the entry points the shell calls and routes each input to its concern.

Not thread-safe: one owner (the shell's task) calls it.
"""
from __future__ import annotations

from typing import Any

from . import messages as m
from .election import Election
from .log_replication import LogReplication
from .roles import LeaderState, NotLeader


class RaftCore(Election, LogReplication):
    """The entry points the shell calls: each input goes to its concern, then every
    follower fetches if it may, and the effects queued meanwhile are handed back."""

    # -- inputs --------------------------------------------------------------------

    def step(self, message: Any, now_ms: int, sender: int | None = None) -> list[m.Effect]:
        """Feed a response, tick, flush completion or failure; returns effects to run."""
        if isinstance(message, m.Tick):
            self._on_tick(now_ms)
        elif isinstance(message, m.Flushed):
            self._on_flushed(message.end_offset, now_ms)
        elif isinstance(message, m.RequestFailed):
            self._on_request_failed(message, now_ms)
        elif isinstance(message, m.SnapshotLoaded):
            self._on_snapshot_loaded(message, now_ms)
        elif isinstance(message, m.VoteResponse):
            self._on_vote_response(message, sender, now_ms)
        elif isinstance(message, m.FetchResponse):
            self._on_fetch_response(message, sender, now_ms)
        elif isinstance(message, (m.BeginQuorumEpochResponse, m.EndQuorumEpochResponse)):
            self._observe(message.epoch, message.leader_id, now_ms)
        else:
            raise TypeError(f"unexpected message {message!r}")
        self._maybe_fetch(now_ms)
        return self._drain()

    def handle_request(self, sender: int, request: m.Request, now_ms: int
                       ) -> tuple[m.Response, list[m.Effect]]:
        """Answer a request; the shell runs the effects (Persist first) before replying."""
        if isinstance(request, m.VoteRequest):
            response: m.Response = self._on_vote(request, now_ms)
        elif isinstance(request, m.BeginQuorumEpochRequest):
            response = self._on_begin_epoch(request, now_ms)
        elif isinstance(request, m.EndQuorumEpochRequest):
            response = self._on_end_epoch(request, now_ms)
        elif isinstance(request, m.FetchRequest):
            response = self._on_fetch(request, now_ms)
        else:
            raise TypeError(f"unexpected request {request!r}")
        self._maybe_fetch(now_ms)
        return response, self._drain()

    def propose(self, entries: list[Any], now_ms: int) -> tuple[int, list[m.Effect]]:
        """Leader only: append entries at the current epoch; returns their last offset."""
        if not isinstance(self._role, LeaderState):
            raise NotLeader(self.leader_id, self.epoch)
        last = self.log.append_as_leader(entries, self.epoch)
        self._out.append(m.Flush())
        return last, self._drain()

    def resign(self, now_ms: int) -> list[m.Effect]:
        """Graceful: a leader hands over (EndQuorumEpoch) before it stops."""
        if isinstance(self._role, LeaderState):
            successors = self._successors()
            for v in self._other_voters():
                self._out.append(m.Send(v, m.EndQuorumEpochRequest(self.epoch, self.node_id,
                                                                     successors)))
            self._become_unattached(self.epoch, self.voted_for, now_ms)
        return self._drain()
