"""A group's persisted form: what its metadata record in __consumer_offsets holds.

Written on every generation change and restored on load (records.py encodes it), so
members of a Stable group keep heartbeating across a coordinator move or restart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .group_state import GroupStateMachine
from .group_types import GroupState, Member


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
    def of(cls, group: GroupStateMachine) -> "GroupSnapshot":
        return cls(group.protocol_type or "", group.generation_id, group.protocol_name,
                   group.leader_id, group.state_timestamp,
                   [LoadedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.rebalance_timeout_ms, m.session_timeout_ms,
                                 m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values()]
                   if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
                   else [])

    def restore(self, group: GroupStateMachine, now: int) -> None:
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
