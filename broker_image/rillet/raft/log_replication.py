"""Moving the log: Fetch on both sides, the high watermark, flushes and snapshots.

Followers (and observers, which never vote) pull entries with Fetch; the leader
answers a fetch whose last epoch disagrees with its log with the diverging epoch,
and the follower truncates to it; a fetch below the leader's log start is sent to
its snapshot. The high watermark is the largest offset a majority has flushed,
once that covers the leader's own epoch start.
"""
from __future__ import annotations

from . import messages as m
from .divergence import BELOW_START, BelowStart, EpochEnd, divergence, truncation_offset
from .roles import FollowerState, LeaderState, ReplicaProgress
from .transitions import RoleTransitions

# A divergence below the leader's first entry, without a snapshot to send: truncate to the
# log start (epoch 0 never has entries: the first leader is elected in epoch 1).
_TO_LOG_START = (0, 0)


class LogReplication(RoleTransitions):
    """RaftCore's log half: no state of its own (RoleTransitions holds it)."""

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
