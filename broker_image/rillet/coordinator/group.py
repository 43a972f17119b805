"""One consumer group: the classic group protocol as a pure state machine.

States (Kafka's names): Empty, PreparingRebalance, CompletingRebalance,
Stable, Dead. No I/O and no clock of its own: every call takes `now` (ms),
waiting requests are plain callbacks, and deadlines are checked by `tick`,
which the coordinator calls periodically and after each operation. Group
metadata that must survive a restart is handed to `persist` (synchronous,
the coordinator appends it to __consumer_offsets before returning).

Thread-safety: not thread-safe; owned by the GroupCoordinator and only
touched from the event loop thread. No method awaits, so a check and the
change it guards can never interleave with another request.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from ..protocol import errors
from .consumer_protocol import parse_subscription_topics

NONE = 0


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # (member id, group instance id, metadata of the selected protocol): leader only
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None  # only OffsetCommit v2-4 with an explicit retention


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    heartbeat_deadline: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


def _fail_join(callback: JoinCallback, exc: type[errors.KafkaError], member_id: str = "") -> None:
    callback(JoinResult(exc.code, member_id))


class Group:
    """State of one group; see the module doc for the contract."""

    def __init__(self, group_id: str, config: GroupConfig, now: int,
                 persist: Callable[["Group"], None] = lambda g: None) -> None:
        self.group_id = group_id
        self.config = config
        self.persist = persist
        self.state = GroupState.EMPTY
        self.state_timestamp = now
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> deadline (MEMBER_ID_REQUIRED)
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.rebalance_deadline: int | None = None
        self._initial_join = False
        self._initial_remaining = 0
        self._new_member_added = False
        self.pending_sync: set[str] = set()
        self.sync_deadline: int | None = None

    # -- helpers ---------------------------------------------------------------

    def _transition(self, state: GroupState, now: int) -> None:
        self.state = state
        self.state_timestamp = now

    def _max_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _touch(self, member: Member, now: int) -> None:
        member.heartbeat_deadline = now + member.session_timeout_ms

    def is_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A static member whose instance id now belongs to another member id."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            mine = set(m.protocol_names())
            names = mine if names is None else names & mine
        return names or set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def _join_result(self, member_id: str, leader: str | None = None) -> JoinResult:
        leader_id = self.leader_id if leader is None else leader
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member_id == self.leader_id:
            members = tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(NONE, member_id, self.generation_id, self.protocol_type,
                          self.protocol_name, leader_id or "", members)

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
        self._maybe_prepare_rebalance(now)

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
        self._maybe_prepare_rebalance(now)

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
        self._maybe_prepare_rebalance(now)

    # -- rebalance -------------------------------------------------------------

    def _maybe_prepare_rebalance(self, now: int) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now)
        elif self.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(now)

    def _prepare_rebalance(self, now: int) -> None:
        if self.state == GroupState.COMPLETING_REBALANCE:
            for m in self.members.values():
                m.assignment = b""
                if m.sync_callback is not None:
                    m.sync_callback(SyncResult(errors.RebalanceInProgress.code))
                    m.sync_callback = None
            self.pending_sync.clear()
            self.sync_deadline = None
        max_timeout = self._max_rebalance_timeout()
        if self.state == GroupState.EMPTY:
            # group.initial.rebalance.delay.ms: let more members arrive before the
            # first generation, extended while new members keep joining.
            delay = min(self.config.initial_rebalance_delay_ms, max_timeout)
            self._initial_join = True
            self._initial_remaining = max_timeout - delay
            self._new_member_added = False
            self.rebalance_deadline = now + delay
        else:
            self._initial_join = False
            self.rebalance_deadline = now + max_timeout
        self._transition(GroupState.PREPARING_REBALANCE, now)
        self._try_complete_join(now)

    def _all_joined(self) -> bool:
        return (not self.pending_members
                and all(m.join_callback is not None for m in self.members.values()))

    def _try_complete_join(self, now: int) -> None:
        if self.state == GroupState.PREPARING_REBALANCE and not self._initial_join \
                and self._all_joined():
            self._complete_join(now)

    def _complete_join(self, now: int) -> None:
        # Dynamic members that did not rejoin in time are out; static ones stay
        # (their session timeout decides).
        for mid, m in list(self.members.items()):
            if m.join_callback is None and m.group_instance_id is None:
                self._remove(mid)
        self.rebalance_deadline = None
        self._initial_join = False
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, now)
            self.persist(self)
            return
        self.protocol_name = self.select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self._transition(GroupState.COMPLETING_REBALANCE, now)
        self.pending_sync = set(self.members)
        self.sync_deadline = now + self._max_rebalance_timeout()
        # Not persisted yet (as Kafka): the generation is stored with its assignments
        # when the leader syncs, so a restart never restores members without partitions.
        for m in self.members.values():
            m.assignment = b""
            self._touch(m, now)
            callback, m.join_callback = m.join_callback, None
            if callback is not None:
                callback(self._join_result(m.member_id))

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
        self.remove_member(member_id, now)
        return NONE

    def _remove(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def remove_member(self, member_id: str, now: int) -> None:
        member = self._remove(member_id)
        if member.join_callback is not None:
            member.join_callback(JoinResult(errors.UnknownMemberId.code, member_id))
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(errors.UnknownMemberId.code))
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        elif self.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(now)

    # -- timers ------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Apply every deadline that has passed: pending ids, sessions, rebalance, sync."""
        for mid, deadline in list(self.pending_members.items()):
            if now >= deadline:
                del self.pending_members[mid]
        for mid, m in list(self.members.items()):
            if mid not in self.members or self._kept_alive(m):
                continue
            if now >= m.heartbeat_deadline:
                self.remove_member(mid, now)  # session timeout
        if self.state == GroupState.COMPLETING_REBALANCE and self.sync_deadline is not None \
                and now >= self.sync_deadline:
            for mid in list(self.pending_sync):
                if mid in self.members:
                    self.remove_member(mid, now)
        if self.state == GroupState.PREPARING_REBALANCE and self.rebalance_deadline is not None:
            if now >= self.rebalance_deadline:
                self._on_rebalance_deadline(now)
            else:
                self._try_complete_join(now)

    def _kept_alive(self, m: Member) -> bool:
        """Members waiting for a join or sync answer are not expired meanwhile."""
        return m.join_callback is not None or m.sync_callback is not None

    def _on_rebalance_deadline(self, now: int) -> None:
        if self._initial_join and self._new_member_added and self._initial_remaining > 0:
            delay = min(self.config.initial_rebalance_delay_ms, self._initial_remaining)
            self._initial_remaining -= delay
            self._new_member_added = False
            self.rebalance_deadline = now + delay
            return
        self._complete_join(now)

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

    def describe_state(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state == GroupState.EMPTY

    def mark_dead(self, now: int) -> None:
        for mid in list(self.members):
            m = self._remove(mid)
            if m.join_callback is not None:
                m.join_callback(JoinResult(errors.CoordinatorNotAvailable.code, mid))
            if m.sync_callback is not None:
                m.sync_callback(SyncResult(errors.CoordinatorNotAvailable.code))
        self.pending_members.clear()
        self._transition(GroupState.DEAD, now)


@dataclass
class LoadedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupSnapshot:
    """What a group metadata record holds (the record's value)."""
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp: int
    members: list[LoadedMember] = field(default_factory=list)

    @classmethod
    def of(cls, group: Group) -> "GroupSnapshot":
        return cls(group.protocol_type or "", group.generation_id, group.protocol_name,
                   group.leader_id, group.state_timestamp,
                   [LoadedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms,
                                 m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values()]
                   if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
                   else [])

    def restore(self, group: Group, now: int) -> None:
        """Rebuild a loaded group: Stable with its members, who must heartbeat in time."""
        group.protocol_type = self.protocol_type or None
        group.generation_id = self.generation_id
        group.protocol_name = self.protocol_name
        group.leader_id = self.leader_id
        group.members.clear()
        group.static_members.clear()
        for lm in self.members:
            m = Member(lm.member_id, lm.group_instance_id, lm.client_id, lm.client_host,
                       lm.rebalance_timeout_ms, lm.session_timeout_ms, self.protocol_type,
                       [(self.protocol_name or "", lm.subscription)], lm.assignment)
            m.heartbeat_deadline = now + lm.session_timeout_ms
            group.members[lm.member_id] = m
            if lm.group_instance_id is not None:
                group.static_members[lm.group_instance_id] = lm.member_id
        if group.members:
            group.state = GroupState.STABLE
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
        else:
            group.state = GroupState.EMPTY
            group.leader_id = None
        group.state_timestamp = self.state_timestamp if self.state_timestamp >= 0 else now
