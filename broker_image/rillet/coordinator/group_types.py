"""The values a consumer group is made of and answers with: its states, members, the
join and sync results handed to waiting requests, committed offsets.

Plain data, shared by the group state machine (group_state.py), the protocol handlers
(group.py), the group's persisted form (group_snapshot.py) and the coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

NONE = 0


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupConfig:
    """The group.* broker configs the coordinator applies to every group."""
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class JoinResult:
    """What a JoinGroup answers: the generation, its protocol, its leader (and to the leader,
    the members)."""
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
    """What a SyncGroup answers: the member's assignment."""
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset as __consumer_offsets stores it."""
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None  # only OffsetCommit v2-4 with an explicit retention


@dataclass
class Member:
    """One member of a classic group and its pending JoinGroup or SyncGroup."""
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
    """One JoinGroup, as the handler hands it to the coordinator."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(frozen=True)
class CommitEntry:
    """One partition's offset an OffsetCommit or TxnOffsetCommit asks to store."""
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
