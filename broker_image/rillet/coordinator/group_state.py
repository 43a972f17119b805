"""One consumer group's state machine (the classic group protocol), without its handlers.

States (Kafka's names): Empty, PreparingRebalance, CompletingRebalance,
Stable, Dead. This holds the members and the transitions between states: preparing
and completing a rebalance, removing members, and the deadlines `tick` applies. The
requests that drive it (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the commit check)
are group.py's Group, built on this class. No I/O and no clock of its own: every
call takes `now` (ms), waiting requests are plain callbacks, and deadlines are checked
by `tick`, which the coordinator calls periodically and after each operation. Group
metadata that must survive a restart is handed to `persist` (synchronous, the
coordinator appends it to __consumer_offsets before returning).

Thread-safety: not thread-safe; owned by the GroupCoordinator and only
touched from the event loop thread. No method awaits, so a check and the
change it guards can never interleave with another request.
"""
from __future__ import annotations

import logging
from typing import Callable

from ..protocol import errors
from ..protocol.consumer_protocol import parse_subscription_topics
from .group_types import (NONE, GroupConfig, GroupState, JoinResult, Member,
                          OffsetAndMetadata, SyncResult)

log = logging.getLogger(__name__)


class GroupStateMachine:
    """State of one group; see the module doc for the contract."""

    def __init__(self, group_id: str, config: GroupConfig, now: int,
                 persist: Callable[["GroupStateMachine"], None] = lambda g: None) -> None:
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

    # -- rebalance -------------------------------------------------------------

    def _maybe_prepare_rebalance(self, now: int, reason: str) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now, reason)
        elif self.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(now)

    def _prepare_rebalance(self, now: int, reason: str) -> None:
        # One line per rebalance, as Kafka's coordinator logs: what a user reads when a
        # group keeps rebalancing or waits for a member that does not rejoin.
        log.info("group %s: preparing to rebalance in state %s, generation %d (%s)",
                 self.group_id, self.state.value, self.generation_id, reason)
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
        log.info("group %s: generation %d with %d member(s), protocol %s", self.group_id,
                 self.generation_id, len(self.members), self.protocol_name)
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

    # -- members ---------------------------------------------------------------

    def _remove(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def remove_member(self, member_id: str, now: int, reason: str) -> None:
        member = self._remove(member_id)
        if member.join_callback is not None:
            member.join_callback(JoinResult(errors.UnknownMemberId.code, member_id))
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(errors.UnknownMemberId.code))
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, f"member {member_id} {reason}")
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
                self.remove_member(mid, now, "missed its session timeout")
        if self.state == GroupState.COMPLETING_REBALANCE and self.sync_deadline is not None \
                and now >= self.sync_deadline:
            for mid in list(self.pending_sync):
                if mid in self.members:
                    self.remove_member(mid, now, "did not sync in time")
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

    # -- state -------------------------------------------------------------------

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
