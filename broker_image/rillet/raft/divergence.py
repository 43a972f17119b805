"""Where a follower's log parts from its leader's, and where the follower cuts it: one rule
for the metadata quorum's log and for every partition's log (KIP-101/KIP-279 epochs, the
diverging-epoch Fetch of KIP-595/KIP-320).

Both sides work on what a log says of an epoch (Kafka's LeaderEpochFileCache.endOffsetFor):
the largest epoch it holds that is <= the one asked and the offset where that epoch ends;
(asked epoch, first offset) when every epoch it holds is newer; epoch -1 when it holds
nothing, or, on the follower side, nothing as new. These functions are pure: each caller
asks its own log and acts on the answer.
"""
from __future__ import annotations

from dataclasses import dataclass

EpochEnd = tuple[int, int]   # (epoch, end offset), as end_offset_for_epoch answers


@dataclass(frozen=True)
class BelowStart:
    """The follower's last epoch is older than anything the leader holds: the logs part
    before the leader's first entry (a snapshot, or the log start, is where to begin)."""


BELOW_START = BelowStart()


def divergence(fetch_offset: int, last_fetched_epoch: int,
               ours: EpochEnd) -> EpochEnd | BelowStart | None:
    """Leader side: None when the follower's log matches ours up to `fetch_offset`;
    otherwise the (epoch, end offset) of ours it must truncate to, or BELOW_START.

    `ours`: our end_offset_for_epoch(last_fetched_epoch). A fetch from an empty log, or
    one that names no epoch (Fetch before v12), has nothing to compare."""
    if last_fetched_epoch < 0 or fetch_offset == 0:
        return None
    epoch, end = ours
    if epoch == last_fetched_epoch and fetch_offset <= end:
        return None
    if epoch < 0:
        return BELOW_START
    return epoch, end


def truncation_offset(leader: EpochEnd, ours: EpochEnd, log_start: int, log_end: int) -> int:
    """Follower side: where to cut our log after the leader named `leader` = (epoch, its end
    offset) as the divergence; `ours`: our end_offset_for_epoch(that epoch).

    Kafka's rule: holding that epoch too, the logs agree up to the smaller of the two ends;
    holding only an older one, ours ends where that epoch ends (a later fetch compares
    again); holding nothing that old, up to the leader's end. Never below our log start."""
    epoch, leader_end = leader
    our_epoch, our_end = ours
    if our_epoch < 0:
        offset = min(leader_end, log_end)
    elif our_epoch != epoch:
        offset = min(our_end, log_end)
    else:
        offset = min(leader_end, our_end)
    return max(offset, log_start)
