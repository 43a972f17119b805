"""The state each Raft role keeps, one dataclass per role (KRaft's LeaderState,
CandidateState, FollowerState, UnattachedState), and the timing that moves a node
between them. Plain values: raft.transitions owns which one a node is in."""
from __future__ import annotations

from dataclasses import dataclass, field

FOLLOWER, CANDIDATE, LEADER, UNATTACHED = "follower", "candidate", "leader", "unattached"


class NotLeader(Exception):
    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the quorum leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True)
class RaftTiming:
    """The quorum's timeouts (controller.quorum.*.ms) and the most one fetch reads."""
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    max_fetch: int = 1 << 20   # bytes on disk, entries in the simulator


@dataclass
class ReplicaProgress:
    """What the leader knows of one follower or observer: how far its log matches, when it last fetched."""
    end_offset: int = -1          # flushed and known to match the leader's log
    last_fetch_ms: int = -1
    begin_sent_ms: int | None = None   # last BeginQuorumEpoch, until it fetches
    acknowledged: bool = False


@dataclass
class LeaderState:
    """The leader's role state for its epoch: every replica's progress."""
    epoch_start_offset: int
    started_ms: int
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    # Observers (broker-only nodes) fetch too; they never count toward a majority.
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)


@dataclass
class CandidateState:
    """A candidate's role state: the votes granted so far and when to start another election."""
    granted: set[int]
    election_deadline_ms: int


@dataclass
class FollowerState:
    """A follower's role state: its leader, when it must hear from it, the fetch under way."""
    leader_id: int | None          # None: an observer still looking for the leader
    fetch_deadline_ms: int         # no answer from the leader until then: elect
    fetch_sent_ms: int | None = None
    fetch_target: int | None = None
    awaiting_flush: bool = False
    loading_snapshot: bool = False


@dataclass
class UnattachedState:
    """A voter that knows no leader and is not a candidate: when it starts an election."""
    election_deadline_ms: int


RoleState = LeaderState | CandidateState | FollowerState | UnattachedState
