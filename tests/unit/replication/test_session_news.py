"""SessionNews: an incremental follower fetch looks only at what it names and what moved,
answers every unnamed partition with news, and still counts the quiet ones as fetches for
the ISR (the same on_follower_fetch a scan of the whole session would have made)."""
from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from rillet.replication.fetch_sessions import INITIAL_EPOCH, FetchSessionCache, PartitionFetch
from rillet.replication.leader import PartitionLeaderState
from rillet.replication.session_news import SessionNews
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager

from ..storage.helpers import append, make_batch

A, B, C = ("t", 0), ("t", 1), ("u", 0)
FOLLOWER = 2


class Leader:
    """A leader's logs (real, on disk), leader states and one follower's session."""

    def __init__(self, tmp_path: Path) -> None:
        self.logs = LogManager([tmp_path])
        self.logs.load_logs(lambda t, p: LogConfig())
        self.leaders: dict[tuple[str, int], PartitionLeaderState] = {}
        self.fetches: list[tuple[tuple[str, int], int, int]] = []
        self.woken: list[object] = []
        self.now = 1000.0
        ids = itertools.count(7)
        self.cache = FetchSessionCache(new_id=lambda: next(ids))
        self.news = SessionNews(self.cache, self.logs, self.leaders, self._fetched,
                                self.woken.append, lambda: self.now)
        self.logs.on_moved(self.news.moved)
        for tp in (A, B, C):
            append(self.logs.create(*tp, LogConfig()), make_batch(3))
            self.leaders[tp] = PartitionLeaderState.become_leader(
                1, 0, 0, (1, FOLLOWER), (1, FOLLOWER), 3, 3, self.now)
        # The follower opens its session at our log ends, and is answered everything.
        self.session, _ = self.cache.resolve(FOLLOWER, 0, INITIAL_EPOCH,
                                             {tp: _at(3) for tp in (A, B, C)}, [])
        self.news.opened(self.session)
        for tp in (A, B, C):
            self.news.answered(self.session, tp, 3, 0)

    def _fetched(self, tp: tuple[str, int], replica: int, offset: int) -> None:
        self.fetches.append((tp, replica, offset))
        plog = self.logs.get(*tp)
        assert plog is not None
        self.leaders[tp].on_follower_fetch(replica, offset, plog.log_end_offset, self.now)

    def incremental(self, named: dict[tuple[str, int], PartitionFetch]
                    ) -> dict[tuple[str, int], PartitionFetch]:
        session, full = self.cache.resolve(FOLLOWER, self.session.id, self.session.epoch,
                                           named, [])
        assert session is self.session and not full
        return self.news.unnamed(session, named)

    def close(self) -> None:
        asyncio.run(self.logs.close())


def _at(offset: int) -> PartitionFetch:
    return PartitionFetch(offset, 0, 0, 0, 1 << 20)


def test_an_idle_incremental_fetch_looks_at_nothing(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    assert leader.session.news == {}
    assert leader.incremental({}) == {}
    assert leader.fetches == []
    leader.close()


def test_a_moved_partition_is_answered_and_wakes_the_session(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    append(leader.logs.get(*B), make_batch(2))   # new records and a new high watermark
    assert leader.woken and all(w is leader.session for w in leader.woken)
    assert leader.incremental({}) == {B: _at(3)}
    assert leader.fetches == []   # counted by the read, once it has checked it (apis/fetch.py)
    # Answered, but its records are still past the follower's position: answered again.
    leader.news.answered(leader.session, B, 5, 0)
    assert leader.incremental({}) == {B: _at(3)}
    # Once the follower names its new position, nothing more to say.
    leader.news.answered(leader.session, B, 5, 0)
    assert leader.incremental({B: _at(5)}) == {}
    leader.news.answered(leader.session, B, 5, 0)
    assert leader.session.news == {}
    assert leader.incremental({}) == {}
    leader.close()


def test_a_high_watermark_or_log_start_the_follower_was_not_told_is_news(
        tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    plog = leader.logs.get(*C)
    assert plog is not None
    plog.advance_log_start(2)
    assert leader.incremental({}) == {C: _at(3)}
    leader.news.answered(leader.session, C, 3, 2)
    assert leader.incremental({}) == {}
    leader.close()


def test_a_partition_no_longer_led_is_answered_every_time(tmp_path: Path) -> None:
    """Its error, until the follower forgets it (as a scan of the session answered it)."""
    leader = Leader(tmp_path)
    leader.news.moved(A)          # the role change is told before it happens
    del leader.leaders[A]
    for _ in range(2):
        assert leader.incremental({}) == {A: _at(3)}
        leader.news.answered(leader.session, A, -1, -1)
    leader.cache.resolve(FOLLOWER, leader.session.id, leader.session.epoch, {}, [A])
    assert A not in leader.session.news
    assert list(leader.cache.holding(A)) == []
    leader.close()


def test_quiet_partitions_count_as_fetches_at_the_session_s_last_look(
        tmp_path: Path) -> None:
    """The ISR sees a quiet partition's follower caught up when its session last fetched,
    without that fetch looking at it; a moved one is not settled before it is looked at."""
    leader = Leader(tmp_path)
    leader.now = 5000.0
    assert leader.incremental({}) == {}
    leader.now = 9000.0
    leader.news.settle(A)
    assert leader.leaders[A].followers[FOLLOWER].last_caught_up_ms == 5000.0
    # B moves after the fetch at 5000: caught up then (settled as it is marked), and
    # not later, until a fetch looks at it.
    append(leader.logs.get(*B), make_batch(1))
    leader.news.settle(B)
    progress = leader.leaders[B].followers[FOLLOWER]
    assert (progress.last_caught_up_ms, progress.last_fetch_ms) == (5000.0, 5000.0)
    assert leader.incremental({}) == {B: _at(3)}
    # Answered, not counted here: the read counts it once it has checked it.
    assert (progress.last_caught_up_ms, progress.last_fetch_ms) == (5000.0, 5000.0)
    leader.close()


def test_an_unnamed_partition_is_never_counted_before_its_read_checks_it(
        tmp_path: Path) -> None:
    """The topic is deleted and made again (a new, empty log; a new leader state) before the
    follower hears of it: its session still says offset 3. Counting that as a fetch would
    make it caught up on a log it does not hold (acks=all would count it); the fetch answers
    the partition and its read refuses the offset instead (here: only the leader state is
    new, which is all this count would have used)."""
    leader = Leader(tmp_path)
    leader.news.moved(A)   # the role change is told before it happens
    del leader.leaders[A]
    leader.leaders[A] = PartitionLeaderState.become_leader(
        1, 0, 0, (1, FOLLOWER), (1, FOLLOWER), 0, 0, leader.now)
    assert leader.incremental({}) == {A: _at(3)}
    assert leader.fetches == []
    assert leader.leaders[A].followers[FOLLOWER].log_end_offset == -1
    leader.close()


def test_a_follower_reset_by_the_metadata_is_not_caught_up_by_an_older_fetch(
        tmp_path: Path) -> None:
    """KIP-903: a replica out of the ISR earns its way back with fetches made since."""
    leader = Leader(tmp_path)
    assert leader.incremental({}) == {}
    leader.news.moved(A)   # the metadata change is told before it is applied
    leader.leaders[A].update_metadata(1, (1, FOLLOWER), (1,), leader.now)
    leader.news.settle(A)
    assert leader.leaders[A].followers[FOLLOWER].log_end_offset == -1
    leader.close()


def test_the_cache_knows_which_sessions_hold_a_partition(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    assert list(leader.cache.holding(A)) == [leader.session]
    # The follower opens a new session: its old one, and what it held, are gone.
    second, _ = leader.cache.resolve(FOLLOWER, leader.session.id, INITIAL_EPOCH,
                                     {B: _at(3)}, [])
    assert list(leader.cache.holding(A)) == []
    assert list(leader.cache.holding(B)) == [second]
    leader.close()


def test_a_named_partition_is_not_settled_before_its_answer(tmp_path: Path) -> None:
    """Named at a new position, a partition counts as fetched by the fetch's own read, not
    by an implied fetch from its new position with our log end of a previous look."""
    leader = Leader(tmp_path)
    leader.now = 2000.0
    assert leader.incremental({A: _at(3)}) == {}
    assert A in leader.session.news
    progress = leader.leaders[A].followers[FOLLOWER]
    before = (progress.last_caught_up_ms, progress.last_fetch_ms)
    leader.news.settle(A)
    assert (progress.last_caught_up_ms, progress.last_fetch_ms) == before
    leader.news.answered(leader.session, A, 3, 0)   # nothing more for it: quiet again
    leader.news.settle(A)
    assert (progress.last_caught_up_ms, progress.last_fetch_ms) == (2000.0, 2000.0)
    leader.close()
