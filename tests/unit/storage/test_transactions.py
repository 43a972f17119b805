"""The log side of transactions: producer state transitions, the LSO, the aborted index
(encoding, search, persistence, rebuild on load and after truncation), markers, and the
cleaner's respect for open and aborted transactions."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.protocol.errors import (InvalidProducerEpoch, InvalidTxnState,
                                    TransactionCoordinatorFenced)
from rillet.records import Record, decode_records, encode_batch, parse_batches
from rillet.storage.txn_index import (AbortedTxn, TransactionIndex, decode_entries,
                                      encode_entries, overlapping)
from rillet.txn_marker import TxnMarker, decode_marker, encode_marker

from .helpers import FakeClock, append, open_log


def txn(pid: int, seq: int, n: int = 2, epoch: int = 0, key: bytes | None = None) -> bytes:
    return encode_batch([Record(i, 1_700_000_000_000 + i, key, f"{pid}-{seq + i}".encode())
                         for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return encode_marker(TxnMarker(pid, epoch, commit, coordinator_epoch), 1_700_000_000_000)


def test_marker_round_trip() -> None:
    data = marker(5, commit=True, epoch=3, coordinator_epoch=9)
    header = parse_batches(data)[0]
    assert header.is_control and header.is_transactional and header.base_sequence == -1
    assert decode_marker(header, data) == TxnMarker(5, 3, True, 9)
    abort = marker(5, commit=False)
    assert decode_marker(parse_batches(abort)[0], abort) == TxnMarker(5, 0, False, 0)


def test_aborted_index_entries_round_trip_in_kafkas_34_byte_format() -> None:
    entries = [AbortedTxn(1, 10, 20, 12), AbortedTxn(2**40, 0, 2**33, 5)]
    data = encode_entries(entries)
    assert len(data) == 2 * 34
    assert decode_entries(data) == entries
    assert decode_entries(data + b"\x00" * 10) == entries  # a torn tail is ignored


def test_overlapping_search_stops_at_a_complete_entry() -> None:
    entries = [AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 20, 30, 31)]
    assert overlapping(entries, 5, 10) == ([entries[1]], True)
    assert overlapping(entries, 0, 3) == ([entries[0]], True)
    assert overlapping(entries, 10, 25) == ([entries[2]], True)
    assert overlapping(entries, 31, 40) == ([], False)


def test_transaction_index_persists_skips_replays_and_truncates(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert not path.exists()  # no file until a transaction aborts here
    index.add(AbortedTxn(1, 0, 4, 5))
    index.add(AbortedTxn(1, 0, 4, 5))   # a replay of the same marker
    index.add(AbortedTxn(2, 6, 8, 9))
    assert TransactionIndex(path).entries == index.entries == [AbortedTxn(1, 0, 4, 5),
                                                               AbortedTxn(2, 6, 8, 9)]
    index.truncate_to(8)
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 4, 5)]


def test_open_transaction_holds_the_lso_until_its_marker_is_replicated(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, encode_batch([Record(0, 1, None, b"plain")]))       # 0
    append(plog, txn(7, 0))                                          # 1-2
    assert plog.last_stable_offset == 1
    assert plog.producer_state.ongoing == {7: 1}
    append(plog, txn(8, 0, n=1))                                     # 3
    append(plog, txn(7, 2, n=1))                                     # 4
    data = bytearray(marker(7, commit=True))
    plog.append(data, parse_batches(data), leader_epoch=0)           # 5, not yet replicated
    assert plog.high_watermark == 5 and plog.last_stable_offset == 1
    plog.high_watermark = 6
    assert plog.last_stable_offset == 3                              # 8's transaction now
    append(plog, marker(8, commit=False))                            # 6
    assert plog.last_stable_offset == plog.high_watermark == 7
    assert plog.producer_state.ongoing == {}
    assert plog.aborted_transactions(0, 7) == [AbortedTxn(8, 3, 6, 7)]
    assert plog.aborted_transactions(4, 7) == [AbortedTxn(8, 3, 6, 7)]
    assert plog.aborted_transactions(0, 3) == []


def test_lso_at_abort_is_the_oldest_other_open_transaction(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, txn(1, 0))            # 0-1
    append(plog, txn(2, 0))            # 2-3
    append(plog, marker(2, commit=False))   # 4
    assert plog.aborted_transactions(0, 5) == [AbortedTxn(2, 2, 4, 0)]


def test_producer_transaction_rules(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, txn(3, 0, epoch=1))
    with pytest.raises(InvalidTxnState):
        append(plog, encode_batch([Record(0, 1, None, b"x")], producer_id=3, producer_epoch=1,
                                  base_sequence=2))
    with pytest.raises(InvalidProducerEpoch):
        append(plog, marker(3, commit=True, epoch=0))
    append(plog, marker(3, commit=False, epoch=2, coordinator_epoch=4))  # bumped epoch
    with pytest.raises(InvalidProducerEpoch):
        append(plog, txn(3, 2, epoch=1))
    with pytest.raises(TransactionCoordinatorFenced):
        append(plog, marker(3, commit=True, epoch=2, coordinator_epoch=3))
    # The next transaction of the bumped epoch starts at sequence 0.
    assert append(plog, txn(3, 0, epoch=2)).base_offset == 3
    assert plog.producer_state.ongoing == {3: 3}


def test_open_transactions_survive_expiry_and_retention_of_their_producer(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock=clock, segment_bytes=300)
    append(plog, txn(4, 0))
    for i in range(6):
        append(plog, encode_batch([Record(0, 1, None, b"x" * 100)]))
    plog.producer_state.remove_expired(10**15, 1)
    plog.producer_state.remove_before(plog.log_end_offset)
    assert plog.producer_state.ongoing == {4: 0}
    assert 4 in plog.producer_state.producers


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_open_transactions_and_aborts(tmp_path: Path, clean: bool) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=400)
    append(plog, txn(1, 0))                  # 0-1
    append(plog, txn(2, 0))                  # 2-3
    append(plog, marker(1, commit=False))    # 4
    for i in range(4):                       # roll a few segments (snapshots on roll)
        append(plog, encode_batch([Record(0, 1, None, b"y" * 150)]))
    append(plog, txn(2, 2, n=1))             # 9
    expected_aborts = plog.aborted_transactions(0, plog.log_end_offset)
    assert expected_aborts == [AbortedTxn(1, 0, 4, 2)]
    if clean:
        plog.close()
    else:
        plog.local.close()   # no snapshot, no recovery point: like a kill -9
        for snap in (tmp_path / "t-0").glob("*.snapshot"):
            snap.unlink()
    again = open_log(tmp_path / "t-0", segment_bytes=400)
    if not clean:   # no checkpoint: from the log start until the leader's ISR raises it
        assert again.high_watermark == 0
        again.high_watermark = again.log_end_offset
    assert again.producer_state.ongoing == {2: 2}
    assert again.last_stable_offset == 2
    assert again.aborted_transactions(0, again.log_end_offset) == expected_aborts


def test_lost_index_entry_is_rebuilt_by_replay_and_truncation_drops_it(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, txn(1, 0))                  # 0-1
    append(plog, marker(1, commit=False))    # 2
    append(plog, encode_batch([Record(0, 1, None, b"z")]))   # 3
    plog.local.close()
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()                       # crashed between the marker and its entry
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        snap.unlink()
    again = open_log(tmp_path / "t-0")
    assert again.aborted_transactions(0, 4) == [AbortedTxn(1, 0, 2, 3)]
    again.truncate_to(2)                     # the marker is gone: the transaction is open
    assert again.aborted_transactions(0, 4) == []
    assert again.producer_state.ongoing == {1: 0}
    assert again.last_stable_offset == 0


def test_follower_replay_builds_the_same_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    append(leader, txn(1, 0), txn(2, 0))
    append(leader, marker(2, commit=False))
    follower = open_log(tmp_path / "follower")
    data = bytearray(b"".join(batch for _, batch in leader.batches()))
    follower.append_replicated(data, parse_batches(data, strict=False))
    follower.high_watermark = follower.log_end_offset
    assert follower.producer_state.ongoing == {1: 0}
    assert follower.last_stable_offset == 0
    assert follower.aborted_transactions(0, 5) == leader.aborted_transactions(0, 5)


def test_a_follower_indexes_each_abort_with_the_stable_offset_at_its_marker(
        tmp_path: Path) -> None:
    """Two aborts in one replicated chunk: P2 opens first, P1 after it, P1 aborts, then P2.
    P1's entry must say the stable offset was P2's first offset when P1 aborted, as the
    leader's does; taken after the whole chunk it would skip P2's abort in a search."""
    leader = open_log(tmp_path / "leader")
    append(leader, txn(2, 0))                    # 0-1: P2 opens
    append(leader, txn(1, 0))                    # 2-3: P1 opens
    append(leader, marker(1, commit=False))      # 4: P1 aborts, P2 still open
    append(leader, marker(2, commit=False))      # 5: P2 aborts
    follower = open_log(tmp_path / "follower")
    data = bytearray(b"".join(batch for _, batch in leader.batches()))
    follower.append_replicated(data, parse_batches(data, strict=False))
    expected = leader.aborted_transactions(0, 6)
    assert [(t.producer_id, t.last_stable_offset) for t in expected] == [(1, 0), (2, 6)]
    assert follower.aborted_transactions(0, 6) == expected
    assert follower.aborted_transactions(0, 5) == leader.aborted_transactions(0, 5)


def test_cleaner_drops_aborted_batches_and_stops_at_the_lso(tmp_path: Path) -> None:
    import asyncio

    from rillet.storage.cleaner import CleaningConfig, LogCleaner

    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock=clock, segment_bytes=200,
                    cleanup_policy="compact")
    append(plog, txn(1, 0, n=1, key=b"k"))       # 0: committed value of k
    append(plog, marker(1, commit=True))         # 1
    append(plog, txn(2, 0, n=1, key=b"k"))       # 2: aborted, must not supersede 0
    append(plog, marker(2, commit=False))        # 3
    append(plog, txn(3, 0, n=1, key=b"j"))       # 4: still open
    for _ in range(3):
        append(plog, encode_batch([Record(0, 1, b"other", b"v")]))

    class Logs:
        def logs(self) -> dict:
            return {("t", 0): plog}

    cleaner = LogCleaner(Logs(), None, lambda _t: {}, clock=clock)
    cleaner.cleaning_config = lambda _t, _p: CleaningConfig(  # type: ignore[method-assign]
        delete_retention_ms=0, min_compaction_lag_ms=0, min_cleanable_ratio=0.0)
    segments_before_lso = [s for s in plog.segments[:-1] if s.next_offset <= 4]
    assert segments_before_lso  # something is cleanable
    asyncio.run(cleaner.clean_log("t", 0, plog, force=True))
    kept = {}
    for header, batch in plog.batches():
        if not header.is_control:
            for r in decode_records(batch)[1]:
                kept[r.offset] = r.value
    assert kept[0] == b"1-0"          # the committed value stayed
    assert 2 not in kept              # the aborted one went
    assert kept[4] == b"3-0"          # the open transaction (past the LSO) untouched
    controls = [h.base_offset for h, _ in plog.batches() if h.is_control]
    assert controls == [1, 3]


def test_a_version_1_snapshot_loads_with_no_transaction_open(tmp_path: Path) -> None:
    import json

    from rillet.storage.producer_state import ProducerStateManager
    (tmp_path / f"{5:020d}.snapshot").write_text(json.dumps(
        {"version": 1, "offset": 5, "producers": [[9, 2, 100, [[0, 4, 0, 4, 100]]]]}))
    state = ProducerStateManager(tmp_path)
    assert state.load_snapshot(10) == 5
    entry = state.producers[9]
    assert (entry.epoch, entry.last_seq, entry.current_txn_first_offset,
            entry.coordinator_epoch) == (2, 4, -1, -1)
    assert state.ongoing == {} and state.first_unstable_offset(10) is None
