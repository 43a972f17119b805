"""A partition leader's follower tracking: high watermark and ISR decisions."""
from __future__ import annotations

import random

from rillet.replication.leader import PartitionLeaderState

LIVE = frozenset({1, 2, 3})
LAG = 1000.0


def _leader(isr: tuple[int, ...] = (1, 2, 3), end: int = 0, hw: int = 0) -> PartitionLeaderState:
    return PartitionLeaderState.become_leader(1, 5, 0, (1, 2, 3), isr, end, hw, now_ms=0)


def test_high_watermark_is_the_slowest_in_sync_replica() -> None:
    s = _leader()
    assert not s.advance_high_watermark(10), "followers not heard from hold it back"
    s.on_follower_fetch(2, 10, 10, 1)
    s.on_follower_fetch(3, 4, 10, 1)
    assert s.advance_high_watermark(10) and s.high_watermark == 4
    s.on_follower_fetch(3, 2, 10, 2)   # a follower that truncated never moves it back
    assert not s.advance_high_watermark(10) and s.high_watermark == 4


def test_a_replica_outside_the_isr_does_not_hold_it_back() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, 1)
    assert s.advance_high_watermark(10) and s.high_watermark == 10


def test_a_pending_addition_counts_at_once_a_pending_removal_only_when_committed() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 12, 1)
    s.pending_isr = (1, 2, 3)
    assert s.advance_high_watermark(12) is False or s.high_watermark < 10
    s = _leader()
    s.on_follower_fetch(2, 10, 10, 1)
    s.pending_isr = (1, 2)
    assert not s.advance_high_watermark(10), "3 is still in the committed ISR"
    s.update_metadata(1, (1, 2, 3), (1, 2), now_ms=2)
    assert s.advance_high_watermark(10) and s.high_watermark == 10


def test_laggards_leave_the_isr_and_come_back_once_caught_up() -> None:
    s = _leader(end=100, hw=100)
    s.on_follower_fetch(2, 100, 100, 500)
    assert s.isr_change(100, 900, LAG, LIVE) is None, "within replica.lag.time.max.ms"
    assert s.isr_change(100, 1500, LAG, LIVE) == (1, 2), "3 never caught up in time"
    s.update_metadata(1, (1, 2, 3), (1, 2), now_ms=1500)
    s.on_follower_fetch(2, 100, 100, 1600)
    s.on_follower_fetch(3, 60, 100, 1600)
    assert s.isr_change(100, 1600, LAG, LIVE) is None, "behind the high watermark"
    s.on_follower_fetch(2, 100, 100, 1700)
    s.on_follower_fetch(3, 100, 100, 1700)
    assert s.isr_change(100, 1700, LAG, LIVE) == (1, 2, 3)


def test_a_fenced_broker_never_joins_and_keeps_no_one_else_out() -> None:
    """Broker 3 fetched, caught up, then stopped (fenced): 2 joins alone."""
    s = _leader(end=100, hw=100, isr=(1,))
    s.on_follower_fetch(2, 100, 100, 500)
    s.on_follower_fetch(3, 100, 100, 500)
    assert s.isr_change(100, 600, LAG, frozenset({1, 2})) == (1, 2)
    assert s.isr_change(100, 600, LAG, LIVE) == (1, 2, 3)


def test_a_replica_taken_out_of_the_isr_rejoins_only_on_fetches_made_since() -> None:
    """The controller took 3 out (it re-registered: a new process, maybe an empty disk).
    What its old process fetched must not bring it back before the new one fetches."""
    s = _leader(end=100, hw=100)
    s.on_follower_fetch(2, 100, 100, 500)
    s.on_follower_fetch(3, 100, 100, 500)
    s.update_metadata(1, (1, 2, 3), (1, 2), now_ms=600)
    assert s.isr_change(100, 700, LAG, LIVE) is None, "its old process's progress is gone"
    assert not s.advance_high_watermark(100)
    s.on_follower_fetch(3, 0, 100, 800)            # the new process starts from nothing
    assert s.isr_change(100, 800, LAG, LIVE) is None
    s.on_follower_fetch(3, 100, 100, 900)          # and catches up
    assert s.isr_change(100, 900, LAG, LIVE) == (1, 2, 3)


def test_a_follower_keeping_up_with_a_busy_leader_stays_in_sync() -> None:
    """Kafka's rule: reaching the end the leader had at the previous fetch counts."""
    s = _leader(end=0)
    end = 0
    for t in range(1, 40):
        fetch_offset = end          # it has what the leader had one round ago
        end += 10                   # the leader keeps appending
        s.on_follower_fetch(2, fetch_offset, end, t * 100)
        s.on_follower_fetch(3, fetch_offset, end, t * 100)
    assert s.isr_change(end, 40 * 100, LAG, LIVE) is None


def test_no_second_change_while_one_is_in_flight() -> None:
    s = _leader()
    assert s.isr_change(0, 5000, LAG, LIVE) == (1,)
    s.pending_isr = (1,)
    assert s.isr_change(0, 6000, LAG, LIVE) is None


def test_an_in_sync_partition_needs_no_isr_check_before_its_oldest_catch_up_plus_lag() -> None:
    s = _leader(end=100, hw=100)
    s.on_follower_fetch(2, 100, 100, 300)
    s.on_follower_fetch(3, 100, 100, 200)
    assert s.next_isr_check_ms(250, LAG) == 200 + LAG
    assert s.isr_change(100, 200 + LAG, LAG, LIVE) is None
    # 3 keeps fetching at the log end of a leader with no writes: the deadline moves on.
    s.on_follower_fetch(3, 100, 100, 1100)
    assert s.next_isr_check_ms(1150, LAG) == 300 + LAG
    # 2 stops: at its deadline it is still in sync, just after it leaves.
    assert s.isr_change(100, 300 + LAG, LAG, LIVE) is None
    assert s.isr_change(100, 301 + LAG, LAG, LIVE) == (1, 3)


def test_an_isr_check_is_due_every_pass_while_a_replica_is_out_or_a_change_in_flight() -> None:
    s = _leader(isr=(1, 2), end=100, hw=100)
    assert s.next_isr_check_ms(500, LAG) == 500, "3 may join any time it catches up"
    s = _leader(end=100, hw=100)
    s.pending_isr = (1, 2)
    assert s.next_isr_check_ms(500, LAG) == 500
    alone = PartitionLeaderState.become_leader(1, 5, 0, (1,), (1,), 0, 0, now_ms=0)
    assert alone.next_isr_check_ms(500, LAG) == float("inf"), "no follower: nothing to shrink"


def test_no_isr_change_before_the_next_check_whatever_the_followers_do() -> None:
    """The property the periodic pass relies on: checking only at next_isr_check_ms (and
    after a metadata change) proposes exactly what checking at every step would."""
    rng = random.Random(7)
    for _ in range(200):
        s = _leader(end=0, hw=0)
        end, now, deadline = 0, 0.0, s.next_isr_check_ms(0, LAG)
        for _ in range(60):
            now += rng.randrange(0, 400)
            if rng.random() < 0.5:
                end += rng.randrange(1, 5)
            for r in (2, 3):
                if rng.random() < 0.6:
                    s.on_follower_fetch(r, rng.choice([end, max(0, end - 3)]), end, now)
            change = s.isr_change(end, now, LAG, LIVE)
            if now < deadline:
                assert change is None, (now, deadline)
            if change is not None:
                break
            if now >= deadline:   # the check ran: the pass schedules the next one
                deadline = s.next_isr_check_ms(now, LAG)
