"""Who leads: the timers that start an election, votes, and the epoch messages.

A voter without a leader waits for an election timeout and becomes candidate
(epoch + 1, votes for itself); a majority of votes makes it leader, which
appends a leader-change entry and tells the others with BeginQuorumEpoch. A
vote goes only to a candidate whose log is at least as up to date as ours, once
per epoch. A leader that stops hearing from a majority resigns ("check
quorum"); one that leaves on purpose names its successors with EndQuorumEpoch.
"""
from __future__ import annotations

from . import messages as m
from .roles import CandidateState, FollowerState, LeaderState, ReplicaProgress, UnattachedState
from .transitions import RoleTransitions


class Election(RoleTransitions):
    """RaftCore's election half: no state of its own (RoleTransitions holds it)."""

    # -- time ----------------------------------------------------------------------

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

    # -- standing and winning ------------------------------------------------------

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
