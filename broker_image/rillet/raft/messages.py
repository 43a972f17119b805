"""What Raft nodes say to each other, and what the core asks its shell to do.

Plain frozen dataclasses: the core (raft.core) consumes messages and returns
effects; the I/O shell (raft.node) maps them to Kafka's RPCs (Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch on __cluster_metadata-0) and the
simulator (raft.sim) passes them through a lossy in-memory network.

Records in a FetchResponse are opaque to the core: bytes of record batches on
disk, a list of entries in the simulator's memory log.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kafka error codes the quorum RPCs use.
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 68


@dataclass(frozen=True)
class VoteRequest:
    """A candidate asks for a vote in `epoch` (Kafka's Vote)."""
    epoch: int
    candidate_id: int
    last_epoch: int
    last_offset: int  # the candidate's log end offset


@dataclass(frozen=True)
class VoteResponse:
    """A voter's answer to a VoteRequest."""
    epoch: int
    granted: bool
    leader_id: int | None
    error: int = NONE


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    """A new leader tells the voters it leads `epoch` (BeginQuorumEpoch)."""
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    """A voter's answer to a BeginQuorumEpochRequest."""
    epoch: int
    leader_id: int | None
    error: int = NONE


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    """A leader gives up `epoch`, naming who should follow it (EndQuorumEpoch)."""
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    """A voter's answer to an EndQuorumEpochRequest."""
    epoch: int
    leader_id: int | None
    error: int = NONE


@dataclass(frozen=True)
class FetchRequest:
    """A follower reads the metadata log from `fetch_offset` (Fetch on __cluster_metadata-0)."""
    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    """The leader's answer to a FetchRequest: records, or where to truncate or which snapshot to load."""
    epoch: int
    leader_id: int | None
    fetch_offset: int  # the offset this answers, so a stale answer is recognised
    high_watermark: int = -1
    records: Any = None
    # Set when the follower's log diverges: truncate to the end of this epoch.
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    # Set when fetch_offset is below the leader's log start: load this snapshot.
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1
    log_start_offset: int = 0
    error: int = NONE


Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
Response = VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse


# -- effects -------------------------------------------------------------------------


@dataclass(frozen=True)
class QuorumStateData:
    """What survives a restart; the shell fsyncs it before any later effect runs."""
    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True)
class Persist:
    """Write `state` to the quorum-state file (fsynced) before any later effect runs."""
    state: QuorumStateData


@dataclass(frozen=True)
class Send:
    """A request to another node; its response comes back through `step`."""
    to: int
    message: Request


@dataclass(frozen=True)
class Flush:
    """Make the log durable up to its current end, then step(Flushed(end))."""


@dataclass(frozen=True)
class Flushed:
    """The log is durable up to `end_offset` (the shell's answer to Flush)."""
    end_offset: int


@dataclass(frozen=True)
class Tick:
    """Time passes; the core compares `now_ms` with its deadlines."""


@dataclass(frozen=True)
class RequestFailed:
    """A request to `to` got no response (connection refused, timed out)."""
    to: int
    message: Request


@dataclass(frozen=True)
class LoadSnapshot:
    """The follower is behind the leader's log start: fetch and install this snapshot."""
    leader_id: int
    end_offset: int
    epoch: int


@dataclass(frozen=True)
class SnapshotLoaded:
    """The shell installed the snapshot ending at `end_offset` of `epoch`."""
    end_offset: int
    epoch: int


Effect = Persist | Send | Flush | LoadSnapshot
