"""Which role a Raft node is in, and the moves between roles: the state the election and
the log replication (raft.election, raft.log_replication) share.

`RoleTransitions` holds the quorum state (epoch, voted-for, the role and its state), the
high watermark and the effects not yet handed to the shell. Every change of epoch, vote or
leader goes through `_become_*`, which queue a Persist first, so the shell fsyncs the
quorum state before anything that follows it leaves. Not thread-safe: one owner calls it.
"""
from __future__ import annotations

import random

from . import messages as m
from .log import RaftLog
from .roles import (CANDIDATE, FOLLOWER, LEADER, UNATTACHED, CandidateState, FollowerState,
                    LeaderState, RaftTiming, ReplicaProgress, RoleState, UnattachedState)


class RoleTransitions:
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

    # -- timers --------------------------------------------------------------------

    def _election_timeout(self) -> int:
        base = self.timing.election_timeout_ms
        return base + self.rng.randrange(base)

    def _fetch_deadline(self, now_ms: int) -> int:
        """When a silent leader is given up on. The jitter keeps followers that lost it at
        the same moment from all standing at once and splitting the vote."""
        jitter = self.rng.randrange(max(1, self.timing.election_timeout_ms // 4))
        return now_ms + self.timing.fetch_timeout_ms + jitter

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
