"""Compaction and transaction markers (storage/txn_cleaning.py): a marker stays while its
transaction has data left, then gets a delete horizon stamped in the batch, and goes in the
first pass after that horizon; aborted data goes at once; read_committed stays right."""
from __future__ import annotations

import asyncio
from pathlib import Path

from rillet.records import Record, decode_records, encode_batch, parse_batches
from rillet.storage.cleaner import CleaningConfig, LogCleaner
from rillet.records import set_delete_horizon
from rillet.storage.txn_cleaning import TxnCleaning, delete_horizon
from rillet.txn_marker import TxnMarker, encode_marker

from .helpers import FakeClock, append, open_log

RETENTION_MS = 1000


def txn(pid: int, key: bytes, value: bytes, seq: int = 0) -> bytes:
    return encode_batch([Record(0, 1_700_000_000_000, key, value)], producer_id=pid,
                        producer_epoch=0, base_sequence=seq, is_transactional=True)


def marker(pid: int, commit: bool) -> bytes:
    return encode_marker(TxnMarker(pid, 0, commit, 0), 1_700_000_000_000)


def header_of(batch: bytes):
    return parse_batches(bytearray(batch))[0]


def test_a_marker_is_kept_while_its_transaction_has_data() -> None:
    pass_ = TxnCleaning(now_ms=5000, delete_retention_ms=RETENTION_MS)
    data, end = txn(7, b"k", b"v"), marker(7, commit=True)
    pass_.on_data_batch(header_of(data), kept_any=True)
    assert pass_.on_marker(header_of(end), end) is end
    assert pass_.earliest_due_ms is None


def test_a_marker_without_data_gets_a_horizon_then_goes() -> None:
    end = marker(7, commit=False)
    first = TxnCleaning(now_ms=5000, delete_retention_ms=RETENTION_MS)
    first.on_data_batch(header_of(txn(7, b"k", b"v")), kept_any=False)
    stamped = first.on_marker(header_of(end), end)
    assert stamped is not None and stamped != end
    header = header_of(bytes(stamped))        # parse_batches checks the recomputed CRC
    assert delete_horizon(header) == 6000 and header.is_control
    assert first.earliest_due_ms == 6000
    early = TxnCleaning(now_ms=5999, delete_retention_ms=RETENTION_MS)
    assert early.on_marker(header, stamped) is stamped
    late = TxnCleaning(now_ms=6000, delete_retention_ms=RETENTION_MS)
    assert late.on_marker(header, stamped) is None and late.markers_removed == 1


def test_stamping_twice_keeps_a_valid_batch() -> None:
    once = set_delete_horizon(marker(1, True), 10)
    assert delete_horizon(header_of(set_delete_horizon(once, 20))) == 20


def test_compaction_removes_aborted_data_and_markers_after_the_horizon(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock=clock, segment_bytes=200,
                    cleanup_policy="compact")
    append(plog, txn(1, b"k", b"old"))      # 0: committed, superseded by offset 4
    append(plog, marker(1, commit=True))    # 1
    append(plog, txn(2, b"j", b"aborted"))  # 2: aborted
    append(plog, marker(2, commit=False))   # 3
    append(plog, txn(3, b"k", b"new"))      # 4: committed, the latest k
    append(plog, marker(3, commit=True))    # 5
    for i in range(4):                       # roll past the markers
        append(plog, encode_batch([Record(0, 1, b"other", str(i).encode())]))

    class Logs:
        def logs(self) -> dict:
            return {("t", 0): plog}

    cleaner = LogCleaner(Logs(), None, lambda _t: {}, clock=clock)
    cleaner.cleaning_config = lambda _t, _p: CleaningConfig(  # type: ignore[method-assign]
        delete_retention_ms=RETENTION_MS, min_compaction_lag_ms=0, min_cleanable_ratio=0.0)

    def state() -> tuple[dict[int, bytes], dict[int, int | None]]:
        values, controls = {}, {}
        for header, batch in plog.batches():
            if header.is_control:
                controls[header.base_offset] = delete_horizon(header)
            else:
                for r in decode_records(batch)[1]:
                    values[r.offset] = r.value
        return values, controls

    asyncio.run(cleaner.clean_log("t", 0, plog, force=True))
    values, controls = state()
    assert 0 not in values and 2 not in values and values[4] == b"new"
    due = int(clock() * 1000) + RETENTION_MS
    # Both emptied transactions' markers wait for the horizon; the live one has none.
    assert controls == {1: due, 3: due, 5: None}
    assert cleaner._state[("t", 0)].tombstone_due_ms == due
    # The pass that removed the aborted records keeps its index entry (a reader may be
    # between them); the next one, seeing no record of it, drops the entry.
    assert [t.producer_id for t in plog.aborted_transactions(0, 20)] == [2]
    clock.advance_ms(RETENTION_MS - 1)
    asyncio.run(cleaner.clean_log("t", 0, plog, force=True))
    assert set(state()[1]) == {1, 3, 5}
    assert plog.aborted_transactions(0, 20) == []
    clock.advance_ms(1)
    segments = [s for s in cleaner._cleanable(plog, cleaner.cleaning_config("t", plog),
                                              int(clock() * 1000))]
    assert cleaner.needs_cleaning(cleaner._state[("t", 0)], segments,
                                  CleaningConfig(RETENTION_MS, 0, 1.1), int(clock() * 1000))
    asyncio.run(cleaner.clean_log("t", 0, plog))
    values, controls = state()
    assert controls == {5: None} and values[4] == b"new"
    # read_committed: nothing open, nothing aborted left to skip.
    assert plog.last_stable_offset == plog.high_watermark
