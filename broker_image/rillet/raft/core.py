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

Roles follow KRaft: a voter without a leader waits for an election timeout and
becomes candidate (epoch + 1, votes for itself); a majority of votes makes it
leader, which appends a leader-change entry and tells the others with
BeginQuorumEpoch. Followers (and observers, which never vote) pull entries with
Fetch; the leader answers a fetch whose last epoch disagrees with its log with
the diverging epoch, and the follower truncates to it. The high watermark is
the largest offset a majority has flushed, once that covers the leader's own
epoch start. A leader that stops hearing from a majority resigns ("check
quorum"), so an isolated node stops acting as leader.

Not thread-safe: one owner (the shell's task) calls it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from . import messages as m
from .divergence import BELOW_START, BelowStart, EpochEnd, divergence, truncation_offset
from .log import RaftLog

FOLLOWER, CANDIDATE, LEADER, UNATTACHED = "follower", "candidate", "leader", "unattached"
# A divergence below the leader's first entry, without a snapshot to send: truncate to the
# log start (epoch 0 never has entries: the first leader is elected in epoch 1).
_TO_LOG_START = (0, 0)


class NotLeader(Exception):
    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the quorum leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True)
class RaftTiming:
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    max_fetch: int = 1 << 20   # bytes on disk, entries in the simulator


@dataclass
class ReplicaProgress:
    end_offset: int = -1          # flushed and known to match the leader's log
    last_fetch_ms: int = -1
    begin_sent_ms: int | None = None   # last BeginQuorumEpoch, until it fetches
    acknowledged: bool = False


@dataclass
class LeaderState:
    epoch_start_offset: int
    started_ms: int
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    # Observers (broker-only nodes) fetch too; they never count toward a majority.
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)


@dataclass
class CandidateState:
    granted: set[int]
    election_deadline_ms: int


@dataclass
class FollowerState:
    leader_id: int | None          # None: an observer still looking for the leader
    fetch_deadline_ms: int         # no answer from the leader until then: elect
    fetch_sent_ms: int | None = None
    fetch_target: int | None = None
    awaiting_flush: bool = False
    loading_snapshot: bool = False


@dataclass
class UnattachedState:
    election_deadline_ms: int


RoleState = LeaderState | CandidateState | FollowerState | UnattachedState


class RaftCore:
    def __init__(self, node_id: int, voters: frozenset[int], log: RaftLog,
                 state: m.QuorumStateData, now_ms: int, rng: random.Random,
                 timing: RaftTiming = RaftTiming()) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self.rng = rng
        self.timing = timing
        self.epoch = state.epoch
        self.voted_for = state.voted_for
        self.high_watermark = 0
        self.flushed_end = log.end_offset   # what is on disk at start is durable
        self._out: list[m.Effect] = []
        self._role: RoleState
        # A leader that restarts does not lead again in its old epoch: it does
        # not know what it acknowledged before the crash.
        leader = state.leader_id if state.leader_id != node_id else None
        if leader is not None:
            self._role = FollowerState(leader, now_ms + self._election_timeout())
        elif self.is_voter:
            # A quorum of one need not wait for anyone: it elects itself at once.
            alone = self.voters == {node_id}
            self._role = UnattachedState(now_ms if alone else now_ms + self._election_timeout())
        else:
            self._role = FollowerState(None, now_ms + timing.fetch_timeout_ms)
        snap = log.snapshot()
        if snap is not None:
            self.high_watermark = snap[0]

    # -- queries -------------------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def role(self) -> str:
        return {LeaderState: LEADER, CandidateState: CANDIDATE, FollowerState: FOLLOWER,
                UnattachedState: UNATTACHED}[type(self._role)]

    @property
    def is_leader(self) -> bool:
        return isinstance(self._role, LeaderState)

    @property
    def leader_id(self) -> int | None:
        if isinstance(self._role, LeaderState):
            return self.node_id
        if isinstance(self._role, FollowerState):
            return self._role.leader_id
        return None

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def epoch_start_offset(self) -> int:
        """Leader only: offset of its leader-change entry; -1 otherwise."""
        return self._role.epoch_start_offset if isinstance(self._role, LeaderState) else -1

    def quorum_state(self) -> m.QuorumStateData:
        return m.QuorumStateData(self.epoch, self.voted_for, self.leader_id)

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        """Leader only: what each voter has flushed and when it last fetched."""
        if isinstance(self._role, LeaderState):
            return dict(self._role.progress)
        return {}

    def observer_progress(self) -> dict[int, ReplicaProgress]:
        """Leader only: the same for observers seen this epoch."""
        if isinstance(self._role, LeaderState):
            return dict(self._role.observers)
        return {}

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

    # -- time ----------------------------------------------------------------------

    def _election_timeout(self) -> int:
        base = self.timing.election_timeout_ms
        return base + self.rng.randrange(base)

    def _on_tick(self, now_ms: int) -> None:
        role = self._role
        if isinstance(role, LeaderState):
            self._leader_tick(role, now_ms)
        elif isinstance(role, (UnattachedState, CandidateState)):
            if now_ms >= role.election_deadline_ms and self.is_voter:
                self._become_candidate(now_ms)
        elif isinstance(role, FollowerState):
            if role.fetch_sent_ms is not None and \
                    now_ms - role.fetch_sent_ms >= self.timing.request_timeout_ms:
                role.fetch_sent_ms = None
            if now_ms >= role.fetch_deadline_ms:
                if self.is_voter:
                    self._become_candidate(now_ms)
                else:
                    role.leader_id = None
                    role.fetch_deadline_ms = now_ms + self.timing.fetch_timeout_ms

    def _leader_tick(self, role: LeaderState, now_ms: int) -> None:
        for v, progress in role.progress.items():
            if progress.acknowledged:
                continue
            if progress.begin_sent_ms is None or \
                    now_ms - progress.begin_sent_ms >= self.timing.request_timeout_ms:
                progress.begin_sent_ms = now_ms
                self._out.append(m.Send(v, m.BeginQuorumEpochRequest(self.epoch, self.node_id)))
        # Check quorum: without fetches from a majority the leader cannot commit, and
        # clients are better served by the leader the others will elect.
        window = self.timing.fetch_timeout_ms
        if now_ms - role.started_ms < window:
            return
        heard = 1 + sum(1 for p in role.progress.values()
                        if p.last_fetch_ms >= 0 and now_ms - p.last_fetch_ms < window)
        if heard < self.majority:
            self._become_unattached(self.epoch, self.voted_for, now_ms)

    # -- transitions ---------------------------------------------------------------

    def _persist(self) -> None:
        self._out.append(m.Persist(self.quorum_state()))

    def _become_unattached(self, epoch: int, voted_for: int | None, now_ms: int,
                           deadline_ms: int | None = None) -> None:
        self.epoch, self.voted_for = epoch, voted_for
        if self.is_voter:
            deadline = deadline_ms if deadline_ms is not None else \
                now_ms + self._election_timeout()
            self._role = UnattachedState(deadline)
        else:
            self._role = FollowerState(None, now_ms + self.timing.fetch_timeout_ms)
        self._persist()

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if epoch > self.epoch:
            self.voted_for = None
        self.epoch = epoch
        self._role = FollowerState(leader_id, self._fetch_deadline(now_ms))
        self._persist()

    def _fetch_deadline(self, now_ms: int) -> int:
        """When a silent leader is given up on. The jitter keeps followers that lost it at
        the same moment from all standing at once and splitting the vote."""
        jitter = self.rng.randrange(max(1, self.timing.election_timeout_ms // 4))
        return now_ms + self.timing.fetch_timeout_ms + jitter

    def _become_candidate(self, now_ms: int) -> None:
        self.epoch += 1
        self.voted_for = self.node_id
        self._role = CandidateState({self.node_id}, now_ms + self._election_timeout())
        self._persist()
        if self.majority == 1:
            self._become_leader(now_ms)
            return
        request = m.VoteRequest(self.epoch, self.node_id, self.log.last_epoch,
                                self.log.end_offset)
        for v in self._other_voters():
            self._out.append(m.Send(v, request))

    def _become_leader(self, now_ms: int) -> None:
        start = self.log.end_offset
        role = LeaderState(start, now_ms,
                           {v: ReplicaProgress() for v in self._other_voters()})
        self._role = role
        self._persist()
        self.log.append_leader_change(self.epoch, self.node_id)
        self._out.append(m.Flush())
        self._leader_tick(role, now_ms)

    def _observe(self, epoch: int, leader_id: int | None, now_ms: int) -> bool:
        """A message from a later epoch (or naming the leader we lack): follow it.

        Returns True when the caller's message is stale and must be ignored."""
        if epoch > self.epoch:
            if leader_id is not None and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now_ms)
            else:
                self._become_unattached(epoch, None, now_ms)
            return False
        if epoch < self.epoch:
            return True
        if leader_id is not None and leader_id != self.node_id and self.leader_id is None \
                and not isinstance(self._role, LeaderState):
            self._become_follower(epoch, leader_id, now_ms)
        return False

    # -- votes ---------------------------------------------------------------------

    def _on_vote(self, req: m.VoteRequest, now_ms: int) -> m.VoteResponse:
        if req.candidate_id not in self.voters or not self.is_voter:
            return m.VoteResponse(self.epoch, False, self.leader_id, m.INCONSISTENT_VOTER_SET)
        if req.epoch < self.epoch:
            return m.VoteResponse(self.epoch, False, self.leader_id, m.FENCED_LEADER_EPOCH)
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, None, now_ms)
        if self.leader_id is not None or self.voted_for not in (None, req.candidate_id):
            return m.VoteResponse(self.epoch, False, self.leader_id)
        if (req.last_epoch, req.last_offset) < (self.log.last_epoch, self.log.end_offset):
            return m.VoteResponse(self.epoch, False, None)
        if self.voted_for is None:
            self._become_unattached(self.epoch, req.candidate_id, now_ms)
        return m.VoteResponse(self.epoch, True, None)

    def _on_vote_response(self, resp: m.VoteResponse, sender: int | None,
                          now_ms: int) -> None:
        if self._observe(resp.epoch, resp.leader_id, now_ms):
            return
        role = self._role
        if not isinstance(role, CandidateState) or resp.epoch != self.epoch:
            return
        if resp.granted and sender is not None and sender in self.voters:
            role.granted.add(sender)
            if len(role.granted) >= self.majority:
                self._become_leader(now_ms)

    # -- epochs --------------------------------------------------------------------

    def _on_begin_epoch(self, req: m.BeginQuorumEpochRequest, now_ms: int
                        ) -> m.BeginQuorumEpochResponse:
        if req.epoch < self.epoch:
            return m.BeginQuorumEpochResponse(self.epoch, self.leader_id, m.FENCED_LEADER_EPOCH)
        if req.epoch > self.epoch or self.leader_id is None:
            self._become_follower(req.epoch, req.leader_id, now_ms)
        return m.BeginQuorumEpochResponse(self.epoch, self.leader_id)

    def _on_end_epoch(self, req: m.EndQuorumEpochRequest, now_ms: int
                      ) -> m.EndQuorumEpochResponse:
        if req.epoch < self.epoch:
            return m.EndQuorumEpochResponse(self.epoch, self.leader_id, m.FENCED_LEADER_EPOCH)
        if req.epoch > self.epoch or self.leader_id == req.leader_id:
            # The leader is leaving: elect soon, the preferred successors first.
            rank = (req.preferred_successors.index(self.node_id)
                    if self.node_id in req.preferred_successors else len(self.voters))
            soon = now_ms + rank * 50 + self.rng.randrange(50)
            voted = self.voted_for if req.epoch == self.epoch else None
            self._become_unattached(req.epoch, voted, now_ms, deadline_ms=soon)
        return m.EndQuorumEpochResponse(self.epoch, self.leader_id)

    # -- fetch: the leader's side --------------------------------------------------

    def _on_fetch(self, req: m.FetchRequest, now_ms: int) -> m.FetchResponse:
        role = self._role
        if req.epoch > self.epoch:
            # The fetcher follows a later leader than we know of.
            self._become_unattached(req.epoch, None, now_ms)
            return self._fetch_error(req, m.UNKNOWN_LEADER_EPOCH)
        if req.epoch < self.epoch:
            return self._fetch_error(req, m.FENCED_LEADER_EPOCH)
        if not isinstance(role, LeaderState):
            return self._fetch_error(req, m.NOT_LEADER_OR_FOLLOWER)
        snapshot = self.log.snapshot()
        diverging = self._divergence(req)
        if snapshot is not None and (req.fetch_offset < self.log.start_offset
                                     or diverging is BELOW_START):
            return m.FetchResponse(self.epoch, self.node_id, req.fetch_offset,
                                   self.high_watermark, snapshot_end_offset=snapshot[0],
                                   snapshot_epoch=snapshot[1],
                                   log_start_offset=self.log.start_offset)
        if diverging is not None:
            if isinstance(diverging, BelowStart):
                diverging = _TO_LOG_START
            return m.FetchResponse(self.epoch, self.node_id, req.fetch_offset,
                                   self.high_watermark, diverging_epoch=diverging[0],
                                   diverging_end_offset=diverging[1],
                                   log_start_offset=self.log.start_offset)
        progress = role.progress.get(req.replica_id)
        if progress is not None:
            progress.end_offset = req.fetch_offset
            progress.last_fetch_ms = now_ms
            progress.acknowledged = True
            self._advance_high_watermark(role)
        elif req.replica_id >= 0:
            role.observers[req.replica_id] = ReplicaProgress(req.fetch_offset, now_ms)
        records = self.log.read(req.fetch_offset, self.timing.max_fetch)
        return m.FetchResponse(self.epoch, self.node_id, req.fetch_offset,
                               self.high_watermark, records,
                               log_start_offset=self.log.start_offset)

    def _divergence(self, req: m.FetchRequest) -> EpochEnd | BelowStart | None:
        """(epoch, end offset) to truncate to, BELOW_START, or None when the fetcher's log
        matches ours."""
        snapshot = self.log.snapshot()
        if snapshot is not None and (req.fetch_offset, req.last_fetched_epoch) == snapshot:
            return None
        if req.fetch_offset > 0 and req.last_fetched_epoch < 0:
            # Entries without an epoch: nothing to compare them with (a quorum Fetch always
            # names one), so from our start or snapshot again.
            return BELOW_START
        return divergence(req.fetch_offset, req.last_fetched_epoch,
                          self.log.end_offset_for_epoch(req.last_fetched_epoch))

    def _fetch_error(self, req: m.FetchRequest, error: int) -> m.FetchResponse:
        return m.FetchResponse(self.epoch, self.leader_id, req.fetch_offset, error=error)

    def _advance_high_watermark(self, role: LeaderState) -> None:
        acked = sorted([self.flushed_end] + [p.end_offset for p in role.progress.values()],
                       reverse=True)
        candidate = acked[self.majority - 1]
        # Entries of earlier epochs commit only together with one of our own
        # (Raft's rule; the leader-change entry at epoch start is ours).
        if candidate > self.high_watermark and candidate > role.epoch_start_offset:
            self.high_watermark = candidate

    def _on_flushed(self, end_offset: int, now_ms: int) -> None:
        self.flushed_end = min(max(self.flushed_end, end_offset), self.log.end_offset)
        role = self._role
        if isinstance(role, LeaderState):
            self._advance_high_watermark(role)
        elif isinstance(role, FollowerState) and end_offset >= self.log.end_offset:
            role.awaiting_flush = False

    # -- fetch: the follower's side ------------------------------------------------

    def _maybe_fetch(self, now_ms: int) -> None:
        role = self._role
        if not isinstance(role, FollowerState):
            return
        if role.fetch_sent_ms is not None or role.awaiting_flush or role.loading_snapshot:
            return
        target = role.leader_id
        if target is None:
            others = sorted(self._other_voters())
            if not others:
                return
            target = self.rng.choice(others)
        role.fetch_sent_ms = now_ms
        role.fetch_target = target
        self._out.append(m.Send(target, m.FetchRequest(
            self.epoch, self.node_id, self.log.end_offset, self.log.last_epoch)))

    def _on_request_failed(self, failed: m.RequestFailed, now_ms: int) -> None:
        role = self._role
        if isinstance(failed.message, m.FetchRequest) and isinstance(role, FollowerState) \
                and role.fetch_target == failed.to:
            role.fetch_sent_ms = None
            if role.leader_id is None:
                role.fetch_target = None

    def _on_fetch_response(self, resp: m.FetchResponse, sender: int | None,
                           now_ms: int) -> None:
        role = self._role
        # Only the answer to the fetch in flight counts: a late or duplicated one
        # would re-apply a snapshot or records the log has moved past.
        expected = isinstance(role, FollowerState) and role.fetch_sent_ms is not None \
            and sender == role.fetch_target
        if expected:
            role.fetch_sent_ms = None
        if self._observe(resp.epoch, resp.leader_id, now_ms):
            return
        role = self._role
        if not expected or not isinstance(role, FollowerState) or resp.epoch != self.epoch \
                or sender != role.leader_id or resp.leader_id != sender:
            if isinstance(role, FollowerState) and resp.epoch == self.epoch \
                    and sender == role.leader_id and resp.leader_id is None:
                # Our leader says it no longer leads (it restarted or resigned).
                self._become_unattached(self.epoch, self.voted_for, now_ms)
            return
        if resp.error != m.NONE or resp.fetch_offset != self.log.end_offset:
            return   # an error we already acted on, or the answer to an older fetch
        role.fetch_deadline_ms = self._fetch_deadline(now_ms)
        if resp.snapshot_end_offset >= 0:
            role.loading_snapshot = True
            self._out.append(m.LoadSnapshot(sender, resp.snapshot_end_offset,
                                            resp.snapshot_epoch))
            return
        if resp.diverging_end_offset >= 0:
            self._truncate_to_divergence(resp.diverging_epoch, resp.diverging_end_offset)
            return
        if resp.records:
            self.log.append_as_follower(resp.records)
            role.awaiting_flush = True
            self._out.append(m.Flush())
        hw = min(resp.high_watermark, self.log.end_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw

    def _truncate_to_divergence(self, epoch: int, end_offset: int) -> None:
        ours = self.log.end_offset_for_epoch(epoch)
        if ours[0] < 0:
            # Every entry of ours is newer than that epoch (RaftLog answers -1 for that,
            # where a partition's epoch cache names the epoch and its first offset).
            ours = (epoch, self.log.start_offset)
        offset = truncation_offset((epoch, end_offset), ours, self.log.start_offset,
                                   self.log.end_offset)
        if offset < self.high_watermark:
            raise AssertionError(f"node {self.node_id}: truncating committed entries "
                                 f"({offset} < high watermark {self.high_watermark})")
        self.log.truncate_to(offset)
        self.flushed_end = min(self.flushed_end, self.log.end_offset)

    def _on_snapshot_loaded(self, loaded: m.SnapshotLoaded, now_ms: int) -> None:
        role = self._role
        if isinstance(role, FollowerState):
            role.loading_snapshot = False
        if loaded.end_offset >= 0:
            self.flushed_end = self.log.end_offset
            self.high_watermark = max(self.high_watermark, loaded.end_offset)

    # -- helpers -------------------------------------------------------------------

    def _other_voters(self) -> list[int]:
        return sorted(v for v in self.voters if v != self.node_id)

    def _successors(self) -> tuple[int, ...]:
        role = self._role
        if not isinstance(role, LeaderState):
            return ()
        return tuple(sorted(role.progress, key=lambda v: -role.progress[v].end_offset))

    def _drain(self) -> list[m.Effect]:
        out, self._out = self._out, []
        return out
