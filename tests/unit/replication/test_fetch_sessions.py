"""Follower fetch sessions (KIP-227): the leader's cache and the follower's handler, and the
two together over several rounds, as a leader and a follower would run them."""
from __future__ import annotations

import itertools

import pytest

from rillet.protocol import errors
from rillet.replication.fetch_session_handler import FetchSessionHandler
from rillet.replication.fetch_sessions import (
    FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSessionCache, PartitionFetch,
    needs_answer, next_epoch)

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def _at(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(offset, current_leader_epoch=epoch, last_fetched_epoch=epoch,
                          log_start_offset=0, partition_max_bytes=1 << 20)


def _cache(max_sessions: int = 10) -> FetchSessionCache:
    ids = itertools.count(7)
    return FetchSessionCache(max_sessions, new_id=lambda: next(ids))


def test_epochs_wrap_to_one_never_to_the_open_or_sessionless_ones() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch((1 << 31) - 1) == 1


def test_a_full_fetch_at_epoch_zero_opens_a_session_with_every_partition() -> None:
    cache = _cache()
    session, full = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(5), B: _at(0)}, [])
    assert full and session is not None
    assert (session.id, session.replica_id, session.epoch) == (7, 2, 1)
    assert set(session.partitions) == {A, B}
    assert cache.opened == 1 and cache.partitions_named == 2


def test_an_incremental_fetch_updates_named_partitions_and_drops_forgotten_ones() -> None:
    cache = _cache()
    session, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(5), B: _at(0)}, [])
    assert session is not None
    same, full = cache.resolve(2, session.id, 1, {A: _at(9), C: _at(3)}, [B])
    assert same is session and not full
    assert {tp: c.fetch.fetch_offset for tp, c in session.partitions.items()} == {A: 9, C: 3}
    assert session.epoch == 2


def test_a_wrong_epoch_or_unknown_session_is_refused_with_its_error_code() -> None:
    cache = _cache()
    session, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(5)}, [])
    assert session is not None
    with pytest.raises(errors.InvalidFetchSessionEpoch) as wrong:
        cache.resolve(2, session.id, 5, {}, [])
    assert wrong.value.code == 71
    with pytest.raises(errors.FetchSessionIdNotFound) as unknown:
        cache.resolve(2, 12345, 1, {}, [])
    assert unknown.value.code == 70
    # Another replica cannot use it.
    with pytest.raises(errors.FetchSessionIdNotFound):
        cache.resolve(3, session.id, 1, {}, [])
    # The refused fetches did not move it on.
    assert cache.resolve(2, session.id, 1, {}, [])[0] is session


def test_epoch_zero_or_final_closes_the_named_session() -> None:
    cache = _cache()
    first, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(5)}, [])
    assert first is not None
    second, full = cache.resolve(2, first.id, INITIAL_EPOCH, {A: _at(6)}, [])
    assert full and second is not None and second.id != first.id and len(cache) == 1
    none, full = cache.resolve(2, second.id, FINAL_EPOCH, {A: _at(6)}, [])
    assert none is None and full and len(cache) == 0


def test_the_least_recently_used_session_is_evicted_when_full() -> None:
    cache = _cache(max_sessions=2)
    s1, _ = cache.resolve(1, 0, INITIAL_EPOCH, {A: _at(0)}, [])
    s2, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(0)}, [])
    assert s1 is not None and s2 is not None
    cache.resolve(1, s1.id, 1, {}, [])   # s1 used: s2 is now the oldest
    cache.resolve(3, 0, INITIAL_EPOCH, {A: _at(0)}, [])
    with pytest.raises(errors.FetchSessionIdNotFound):
        cache.resolve(2, s2.id, 1, {}, [])
    cache.resolve(1, s1.id, 2, {}, [])


def test_an_unnamed_partition_is_answered_only_with_something_new() -> None:
    cached = CachedPartition(_at(10))
    assert needs_answer(cached, 10, 10, 0)   # never answered: its high watermark is news
    cached.high_watermark, cached.log_start_offset = 10, 0
    assert not needs_answer(cached, 10, 10, 0)
    assert needs_answer(cached, 11, 10, 0)   # records past its position
    assert needs_answer(cached, 10, 11, 0)   # the high watermark moved
    assert needs_answer(cached, 10, 10, 4)   # DeleteRecords moved the log start


def test_the_handler_sends_everything_first_then_only_what_changed() -> None:
    handler = FetchSessionHandler()
    first = handler.build({A: _at(0), B: _at(0)})
    assert first.full and (first.session_id, first.epoch) == (0, INITIAL_EPOCH)
    assert set(first.partitions) == {A, B}
    assert handler.handle_response(first, 0, session_id=7)

    idle = handler.build({A: _at(0), B: _at(0)})
    assert (idle.session_id, idle.epoch, idle.partitions, idle.forgotten) == (7, 1, {}, ())
    assert handler.handle_response(idle, 0, session_id=7)

    moved = handler.build({A: _at(4), C: _at(0)})
    assert (moved.epoch, set(moved.partitions), moved.forgotten) == (2, {A, C}, (B,))


def test_the_handler_resends_what_an_unanswered_fetch_carried() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build({A: _at(0)}), 0, session_id=7)
    lost = handler.build({A: _at(3)})
    assert set(lost.partitions) == {A}
    assert not handler.handle_response(lost, errors.NotLeaderOrFollower.code, session_id=0)
    again = handler.build({A: _at(3)})
    assert (again.epoch, set(again.partitions)) == (1, {A})


@pytest.mark.parametrize("code, closes", [(errors.FetchSessionIdNotFound.code, False),
                                          (errors.InvalidFetchSessionEpoch.code, True)])
def test_a_session_error_makes_the_next_fetch_full(code: int, closes: bool) -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build({A: _at(0)}), 0, session_id=7)
    assert not handler.handle_response(handler.build({A: _at(0)}), code, session_id=0)
    reopen = handler.build({A: _at(0)})
    assert reopen.full and set(reopen.partitions) == {A}
    assert reopen.session_id == (7 if closes else 0)


def test_a_connection_failure_reopens_closing_the_old_session() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build({A: _at(0)}), 0, session_id=7)
    handler.reset()
    reopen = handler.build({A: _at(0)})
    assert reopen.full and reopen.session_id == 7


def test_a_leader_declining_sessions_gets_full_fetches_every_time() -> None:
    handler = FetchSessionHandler()
    for _ in range(3):
        sent = handler.build({A: _at(0), B: _at(0)})
        assert sent.full and sent.session_id == 0 and set(sent.partitions) == {A, B}
        assert handler.handle_response(sent, 0, session_id=0)


def test_leader_and_follower_agree_over_rounds_of_appends_and_reassignment() -> None:
    """The handler's fetches resolved by the cache: the leader's view of every partition's
    position is always the follower's, though each fetch names only what moved."""
    cache, handler = _cache(), FetchSessionHandler()
    positions = {A: 0, B: 0, C: 0}
    named_counts = []
    for round_no in range(8):
        if round_no == 3:
            positions[B] += 5          # records appended to B only
        if round_no == 5:
            del positions[C]           # C moved to another leader
        wanted = {tp: _at(o) for tp, o in positions.items()}
        sent = handler.build(wanted)
        session, full = cache.resolve(2, sent.session_id, sent.epoch, sent.partitions,
                                      sent.forgotten)
        assert session is not None and full == sent.full
        assert handler.handle_response(sent, 0, session.id)
        assert {tp: c.fetch for tp, c in session.partitions.items()} == wanted
        named_counts.append(len(sent.partitions) + len(sent.forgotten))
    assert named_counts == [3, 0, 0, 1, 0, 1, 0, 0]


def test_a_replica_opening_again_replaces_its_old_session() -> None:
    """A restarted follower opens with id 0: its earlier session (every partition it
    followed) goes at once, not when the cache is full; other replicas' sessions stay."""
    cache = _cache()
    old, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(5), B: _at(0)}, [])
    other, _ = cache.resolve(3, 0, INITIAL_EPOCH, {A: _at(5)}, [])
    new, _ = cache.resolve(2, 0, INITIAL_EPOCH, {A: _at(9)}, [])
    assert old is not None and other is not None and new is not None
    assert len(cache) == 2
    with pytest.raises(errors.FetchSessionIdNotFound):
        cache.resolve(2, old.id, old.epoch, {}, [])
    assert cache.resolve(3, other.id, other.epoch, {}, [])[0] is other
