"""FetchParking: when the quorum leader may hold back a Fetch that brings no records."""
from __future__ import annotations

from rillet.raft.parking import FetchParking


def test_first_answer_to_a_replica_is_news() -> None:
    assert FetchParking(1000).has_news(2, epoch=1, fetch_offset=10, high_watermark=5, now_ms=0)


def test_same_high_watermark_again_is_not_news() -> None:
    p = FetchParking(1000)
    p.answered(2, 1, 10, 10, now_ms=0)
    assert not p.has_news(2, 1, 10, 10, now_ms=100)


def test_high_watermark_moved_by_the_fetch_itself_is_news() -> None:
    # The follower's fetch at 11 completes the majority: the answer, without records,
    # carries HW 11, which it has never heard. Regression for issue 33 (500 ms late).
    p = FetchParking(1000)
    p.answered(2, 1, 10, 10, now_ms=0)
    assert p.has_news(2, 1, 11, 11, now_ms=5)


def test_what_one_replica_was_told_says_nothing_of_another() -> None:
    p = FetchParking(1000)
    p.answered(2, 1, 11, 11, now_ms=0)
    assert p.has_news(3, 1, 11, 11, now_ms=1)


def test_new_epoch_offset_going_back_or_long_silence_answer_at_once() -> None:
    p = FetchParking(1000)
    p.answered(2, 1, 10, 10, now_ms=0)
    assert p.has_news(2, 2, 10, 10, now_ms=1)       # a later epoch
    assert p.has_news(2, 1, 8, 10, now_ms=1)        # truncated or restarted
    assert p.has_news(2, 1, 10, 10, now_ms=1001)    # silent: it may have restarted
