"""One consumer group: the classic group protocol's requests on its state machine.

JoinGroup (with KIP-394 member ids and KIP-345 static members), SyncGroup, Heartbeat,
LeaveGroup and the commit check of OffsetCommit, each turned into transitions of
group_state.GroupStateMachine (states, rebalances, deadlines). Same contract as the
state machine: pure, `now` passed in, waiting requests are callbacks; owned by the
GroupCoordinator, event loop only, no method awaits.
"""
from __future__ import annotations

import uuid

from ..protocol import errors
from .group_state import GroupStateMachine
from .group_types import (NONE, GroupState, JoinCallback, JoinRequest, JoinResult, Member,
                          SyncCallback, SyncResult)


def _fail_join(callback: JoinCallback, exc: type[errors.KafkaError], member_id: str = "") -> None:
    callback(JoinResult(exc.code, member_id))


class Group(GroupStateMachine):
    """One group's state machine with the protocol's requests; see the module doc."""

    # -- JoinGroup -------------------------------------------------------------

    def join(self, req: JoinRequest, now: int, callback: JoinCallback) -> None:
        if self.state == GroupState.DEAD:
            return _fail_join(callback, errors.CoordinatorNotAvailable, req.member_id)
        if not self.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return _fail_join(callback, errors.InconsistentGroupProtocol, req.member_id)
        if req.member_id == "":
            self._join_unknown_member(req, now, callback)
        else:
            self._join_known_member(req, now, callback)
        self.tick(now)

    def _join_unknown_member(self, req: JoinRequest, now: int, callback: JoinCallback) -> None:
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            if req.group_instance_id in self.static_members:
                self._rejoin_static_member(req, new_id, now, callback)
            else:
                self._add_member_and_rebalance(req, new_id, now, callback)
        elif req.require_known_member_id:
            # KIP-394: hand out an id first, so a client that times out and retries
            # does not leave a ghost member behind.
            self.pending_members[new_id] = now + req.session_timeout_ms
            callback(JoinResult(errors.MemberIdRequired.code, new_id))
        else:
            self._add_member_and_rebalance(req, new_id, now, callback)

    def _join_known_member(self, req: JoinRequest, now: int, callback: JoinCallback) -> None:
        mid = req.member_id
        if mid in self.pending_members:
            del self.pending_members[mid]
            self._add_member_and_rebalance(req, mid, now, callback)
            return
        if self.is_fenced(req.group_instance_id, mid):
            return _fail_join(callback, errors.FencedInstanceId, mid)
        member = self.members.get(mid)
        if member is None or (req.group_instance_id is not None
                              and req.group_instance_id not in self.static_members):
            return _fail_join(callback, errors.UnknownMemberId, mid)
        changed = member.protocols != req.protocols
        if self.state == GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(member, req, now, callback)
        elif self.state == GroupState.COMPLETING_REBALANCE:
            if changed:
                self._update_member_and_rebalance(member, req, now, callback)
            else:
                callback(self._join_result(mid))
        elif self.state == GroupState.STABLE:
            if changed or mid == self.leader_id:
                # The leader rejoins when its metadata changed (e.g. new partitions).
                self._update_member_and_rebalance(member, req, now, callback)
            else:
                self._touch(member, now)
                callback(self._join_result(mid))
        else:
            _fail_join(callback, errors.UnknownMemberId, mid)

    def _add_member_and_rebalance(self, req: JoinRequest, member_id: str, now: int,
                                  callback: JoinCallback) -> None:
        if len(self.members) >= self.config.max_size:
            return _fail_join(callback, errors.GroupMaxSizeReached, member_id)
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols))
        member.join_callback = callback
        self._touch(member, now)
        if not self.members:
            self.protocol_type = req.protocol_type
        if self.leader_id is None:
            self.leader_id = member_id
        self.members[member_id] = member
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if self.state == GroupState.PREPARING_REBALANCE and self._initial_join:
            self._new_member_added = True
        self._maybe_prepare_rebalance(now, f"member {member_id} joined")

    def _update_member_and_rebalance(self, member: Member, req: JoinRequest, now: int,
                                     callback: JoinCallback) -> None:
        if member.join_callback is not None and member.join_callback is not callback:
            # A retried join replaces the one still waiting.
            member.join_callback(JoinResult(errors.RebalanceInProgress.code, member.member_id))
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_callback = callback
        self._touch(member, now)
        self._maybe_prepare_rebalance(now, f"member {member.member_id} rejoined")

    def _rejoin_static_member(self, req: JoinRequest, new_id: str, now: int,
                              callback: JoinCallback) -> None:
        """KIP-345: a restarted static member takes over its old member's place."""
        assert req.group_instance_id is not None
        old_id = self.static_members[req.group_instance_id]
        member = self.members.pop(old_id)
        old_leader = self.leader_id
        if member.join_callback is not None:
            member.join_callback(JoinResult(errors.FencedInstanceId.code, old_id))
            member.join_callback = None
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(errors.FencedInstanceId.code))
            member.sync_callback = None
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[req.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        member.protocols = list(req.protocols)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._touch(member, now)
        if self.state == GroupState.STABLE and self.select_protocol() == self.protocol_name:
            # Same protocol next generation: no rebalance, the member syncs and gets its
            # old assignment. The old leader id is returned so that a restarted leader
            # does not compute an assignment a stable group would never distribute.
            self.persist(self)
            callback(JoinResult(NONE, new_id, self.generation_id, self.protocol_type,
                                self.protocol_name, old_leader or ""))
            return
        member.join_callback = callback
        self._maybe_prepare_rebalance(now, f"static member {req.group_instance_id} rejoined")

    # -- SyncGroup -------------------------------------------------------------

    def sync(self, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], now: int, callback: SyncCallback) -> None:
        err = self._check_member(member_id, instance_id, generation_id)
        if err is None and ((protocol_type is not None and protocol_type != self.protocol_type)
                            or (protocol_name is not None
                                and protocol_name != self.protocol_name)):
            err = errors.InconsistentGroupProtocol
        if err is None and self.state == GroupState.PREPARING_REBALANCE:
            err = errors.RebalanceInProgress
        if err is not None:
            return callback(SyncResult(err.code))
        member = self.members[member_id]
        self._touch(member, now)
        if self.state == GroupState.STABLE:
            return callback(SyncResult(NONE, self.protocol_type, self.protocol_name,
                                       member.assignment))
        # CompletingRebalance: wait for the leader's assignment.
        member.sync_callback = callback
        self.pending_sync.discard(member_id)
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.persist(self)
            self.sync_deadline = None
            self.pending_sync.clear()
            self._transition(GroupState.STABLE, now)
            for m in self.members.values():
                cb, m.sync_callback = m.sync_callback, None
                if cb is not None:
                    cb(SyncResult(NONE, self.protocol_type, self.protocol_name, m.assignment))

    def _check_member(self, member_id: str, instance_id: str | None,
                      generation_id: int) -> type[errors.KafkaError] | None:
        if self.state == GroupState.DEAD:
            return errors.CoordinatorNotAvailable
        if self.is_fenced(instance_id, member_id):
            return errors.FencedInstanceId
        if member_id not in self.members:
            return errors.UnknownMemberId
        if generation_id != self.generation_id:
            return errors.IllegalGeneration
        return None

    # -- Heartbeat / LeaveGroup ------------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation_id: int,
                  now: int) -> int:
        err = self._check_member(member_id, instance_id, generation_id)
        if err is not None:
            return err.code
        self._touch(self.members[member_id], now)
        if self.state == GroupState.PREPARING_REBALANCE:
            return errors.RebalanceInProgress.code
        return NONE

    def leave(self, member_id: str, instance_id: str | None, now: int) -> int:
        if self.state == GroupState.DEAD:
            return errors.CoordinatorNotAvailable.code
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return errors.UnknownMemberId.code
            if member_id and known != member_id:
                return errors.FencedInstanceId.code
            member_id = known
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
            self._try_complete_join(now)
            return NONE
        if member_id not in self.members:
            return errors.UnknownMemberId.code
        self.remove_member(member_id, now, "left the group")
        return NONE

    # -- offsets -----------------------------------------------------------------

    def validate_commit(self, member_id: str, instance_id: str | None,
                        generation_id: int, now: int) -> None:
        """Raise the Kafka error for a commit this group must refuse."""
        if self.state == GroupState.DEAD:
            raise errors.CoordinatorNotAvailable(f"group {self.group_id} is being removed")
        if generation_id < 0 and self.state == GroupState.EMPTY:
            return  # admin / standalone commit
        if self.is_fenced(instance_id, member_id):
            raise errors.FencedInstanceId(f"instance {instance_id} was fenced by a newer member")
        if generation_id < 0 and not member_id and instance_id is None:
            raise errors.UnknownMemberId(
                f"group {self.group_id} is not empty; commits need a member id and generation")
        if member_id not in self.members:
            raise errors.UnknownMemberId(f"{member_id!r} is not a member of {self.group_id}")
        if generation_id != self.generation_id:
            raise errors.IllegalGeneration(
                f"generation {generation_id} is stale, group {self.group_id} is at "
                f"{self.generation_id}")
        if self.state == GroupState.COMPLETING_REBALANCE:
            raise errors.RebalanceInProgress(f"group {self.group_id} is rebalancing")
        self._touch(self.members[member_id], now)
