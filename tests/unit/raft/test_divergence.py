"""The one divergence rule both kinds of log use (raft/divergence.py), on a partition log's
epoch cache and on the quorum's in-memory log, as a leader and as a follower see it."""
from __future__ import annotations

from pathlib import Path

from rillet.raft.divergence import BELOW_START, divergence, truncation_offset
from rillet.raft.log import MemoryLog
from rillet.storage.leader_epoch import LeaderEpochCache


def epochs(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_matching_logs_do_not_diverge(tmp_path: Path) -> None:
    leader = epochs(tmp_path, [(1, 0), (3, 10)])          # log end 20
    assert divergence(15, 3, leader.end_offset_for(3, 20)) is None
    assert divergence(10, 1, leader.end_offset_for(1, 20)) is None   # epoch 1 ends at 10


def test_nothing_to_compare_is_no_divergence() -> None:
    assert divergence(0, -1, (-1, -1)) is None   # an empty follower
    assert divergence(42, -1, (-1, -1)) is None  # Fetch before v12 names no epoch


def test_follower_past_the_end_of_an_epoch_diverges_there(tmp_path: Path) -> None:
    leader = epochs(tmp_path, [(1, 0), (3, 10)])
    # The follower kept epoch 1 up to 14, the leader's epoch 1 ended at 10.
    assert divergence(14, 1, leader.end_offset_for(1, 20)) == (1, 10)
    # The follower has epoch 2, which the leader never had: the largest older one, 1.
    assert divergence(12, 2, leader.end_offset_for(2, 20)) == (1, 10)


def test_an_epoch_older_than_the_leaders_first_is_below_start() -> None:
    log = MemoryLog()
    log.append_as_leader(["a", "b"], 5)
    assert divergence(3, 2, log.end_offset_for_epoch(2)) is BELOW_START


def test_follower_with_the_epoch_cuts_at_the_smaller_end(tmp_path: Path) -> None:
    follower = epochs(tmp_path, [(1, 0), (2, 12)])       # log end 16
    # The leader says: your epoch 2 is mine up to 14.
    assert truncation_offset((2, 14), follower.end_offset_for(2, 16), 0, 16) == 14
    # ... or mine ends after yours: nothing of ours is cut.
    assert truncation_offset((2, 30), follower.end_offset_for(2, 16), 0, 16) == 16


def test_follower_with_only_an_older_epoch_cuts_at_its_end(tmp_path: Path) -> None:
    follower = epochs(tmp_path, [(1, 0), (4, 12)])       # log end 16
    # Asked about epoch 3, which it never had: epoch 1 ends at 12, cut there and compare again
    # (Kafka's rule; not at the leader's end, which says nothing about our epoch 1).
    assert truncation_offset((3, 9), follower.end_offset_for(3, 16), 0, 16) == 12


def test_follower_holding_nothing_that_old_cuts_at_the_leaders_end(tmp_path: Path) -> None:
    follower = epochs(tmp_path, [(4, 5)])
    assert truncation_offset((-1, 3), follower.end_offset_for(-1, 9), 0, 9) == 3
    # ... never below its own log start.
    assert truncation_offset((-1, 3), follower.end_offset_for(-1, 9), 5, 9) == 5


def test_the_quorum_log_truncates_by_the_same_rule() -> None:
    follower = MemoryLog()
    follower.append_as_leader(["a", "b", "c"], 1)       # offsets 0-2 in epoch 1
    follower.append_as_leader(["d", "e"], 2)            # 3-4 in epoch 2 (never committed)
    # The leader's epoch 1 ended at 3 and it never had epoch 2: cut to 3, then compare again.
    leader_answer = (1, 3)
    offset = truncation_offset(leader_answer, follower.end_offset_for_epoch(1),
                               follower.start_offset, follower.end_offset)
    assert offset == 3
    follower.truncate_to(offset)
    assert follower.end_offset == 3


def test_the_quorum_leader_compares_entries_named_without_an_epoch_with_nothing() -> None:
    """A quorum Fetch always names its last epoch; one with entries (offset > 0) but epoch -1
    cannot be matched against the leader's log, so it starts again from the log start."""
    import random

    from rillet.raft import messages as m
    from rillet.raft.core import RaftCore

    log = MemoryLog()
    core = RaftCore(1, frozenset({1}), log, m.QuorumStateData(), 0, random.Random(1))
    core.step(m.Tick(), 0)
    assert core.is_leader
    core.propose(["a", "b", "c"], 1)
    answer, _ = core.handle_request(2, m.FetchRequest(core.epoch, 2, 2, -1), 2)
    assert (answer.diverging_epoch, answer.diverging_end_offset) == (0, 0)
    matching, _ = core.handle_request(2, m.FetchRequest(core.epoch, 2, 1, core.epoch), 3)
    assert matching.diverging_end_offset < 0
