"""Idempotent producer rules: epochs, sequences, duplicates, wrap-around, snapshots."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.protocol.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber

from .helpers import FakeClock, append, make_batch, open_log, read_all_offsets


def pbatch(seq: int, n: int = 2, epoch: int = 0, pid: int = 77) -> bytes:
    return make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_in_sequence_batches_append(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    assert append(plog, pbatch(0)).base_offset == 0
    assert append(plog, pbatch(2)).base_offset == 2
    assert append(plog, pbatch(4, n=3)).base_offset == 4
    assert plog.producer_state.producers[77].last_seq == 6


def test_retried_batch_is_a_duplicate_with_original_offsets(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0))
    append(plog, pbatch(2))
    append(plog, make_batch(1))  # someone else's record in between
    dup = append(plog, pbatch(0))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (0, 1)
    dup = append(plog, pbatch(2))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (2, 3)
    assert plog.log_end_offset == 5
    assert read_all_offsets(plog) == list(range(5))


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for i in range(7):
        append(plog, pbatch(i * 2))
    assert append(plog, pbatch(4)).duplicate  # batch 3 of 7: still cached
    with pytest.raises(OutOfOrderSequenceNumber):
        append(plog, pbatch(2))  # batch 2 of 7: forgotten, and not the next sequence


def test_sequence_gap_is_out_of_order(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0))
    with pytest.raises(OutOfOrderSequenceNumber):
        append(plog, pbatch(5))
    assert plog.log_end_offset == 2


def test_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0, epoch=3))
    with pytest.raises(InvalidProducerEpoch):
        append(plog, pbatch(2, epoch=2))
    with pytest.raises(OutOfOrderSequenceNumber):
        append(plog, pbatch(2, epoch=4))  # a new epoch starts at sequence 0
    assert append(plog, pbatch(0, epoch=4)).base_offset == 2
    assert plog.producer_state.producers[77].epoch == 4


def test_unknown_producer_accepted_at_any_sequence(tmp_path: Path) -> None:
    """Kafka >= 2.5: state may have gone with retention; rejecting would wedge the producer."""
    plog = open_log(tmp_path / "t-0")
    assert append(plog, pbatch(1234)).base_offset == 0
    assert append(plog, pbatch(1236)).base_offset == 2


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(2**31 - 2, n=2))  # last sequence 2**31 - 1
    assert append(plog, pbatch(0)).base_offset == 2
    append(plog, pbatch(2**31 - 1, n=3, pid=5))  # wraps inside one batch: 2**31-1, 0, 1
    assert plog.producer_state.producers[5].last_seq == 1
    assert append(plog, pbatch(2, pid=5)).base_offset == 7


def test_multi_batch_append_is_all_or_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0))
    with pytest.raises(OutOfOrderSequenceNumber):
        append(plog, pbatch(2), pbatch(9))
    assert plog.log_end_offset == 2 and plog.producer_state.producers[77].last_seq == 1
    info = append(plog, pbatch(2), pbatch(4))  # the second checks against the staged first
    assert (info.base_offset, info.last_offset) == (2, 5)


def test_a_failed_second_batch_leaves_no_trace_of_another_producers_first(
        tmp_path: Path) -> None:
    """The first batch of an append is applied only at commit: a refused later batch (here
    another producer's sequence gap) must leave the first producer unknown and nothing
    written."""
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0))
    with pytest.raises(OutOfOrderSequenceNumber):
        append(plog, pbatch(0, pid=5), pbatch(9))
    assert 5 not in plog.producer_state.producers and plog.log_end_offset == 2
    assert append(plog, pbatch(2), pbatch(0, pid=5)).last_offset == 5


def test_a_single_batch_append_updates_the_producer_in_place(tmp_path: Path) -> None:
    """One batch per append (what Kafka's clients send per partition) is applied to the
    producer's entry itself, and retried it is still found as a duplicate."""
    plog = open_log(tmp_path / "t-0")
    append(plog, pbatch(0))
    entry = plog.producer_state.producers[77]
    append(plog, pbatch(2))
    assert plog.producer_state.producers[77] is entry and entry.last_seq == 3
    dup = append(plog, pbatch(2))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (2, 3)


@pytest.mark.parametrize("keep_snapshots", [True, False], ids=["snapshot", "rescan"])
def test_state_survives_reopen(tmp_path: Path, keep_snapshots: bool) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=600)
    for i in range(10):
        append(plog, pbatch(i * 2))
    plog.close()
    assert list((tmp_path / "t-0").glob("*.snapshot"))
    if not keep_snapshots:
        for snap in (tmp_path / "t-0").glob("*.snapshot"):
            snap.unlink()
    again = open_log(tmp_path / "t-0", segment_bytes=600)
    dup = append(again, pbatch(18))
    assert dup.duplicate and dup.base_offset == 18
    with pytest.raises(OutOfOrderSequenceNumber):
        append(again, pbatch(22))
    assert append(again, pbatch(20)).base_offset == 20


def test_torn_snapshot_falls_back(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=600)
    for i in range(10):
        append(plog, pbatch(i * 2))
    plog.close()
    newest = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1]
    newest.write_text('{"version": 1, "offs')
    again = open_log(tmp_path / "t-0", segment_bytes=600)
    assert again.producer_state.producers[77].last_seq == 19


def test_truncation_rewinds_producer_state(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=600)
    for i in range(10):
        append(plog, pbatch(i * 2))
    plog.truncate_to(12)
    assert plog.producer_state.producers[77].last_seq == 11
    assert append(plog, pbatch(12)).base_offset == 12


def test_retention_forgets_producers_whose_batches_are_gone(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=600, retention_bytes=700)
    append(plog, pbatch(0, pid=1))
    for i in range(6):
        append(plog, pbatch(i * 2, pid=2))
    assert plog.apply_retention() == 2
    assert 1 not in plog.producer_state.producers and 2 in plog.producer_state.producers
    # an evicted producer's retry continues with its sequence: accepted (unknown producer)
    assert not append(plog, pbatch(2, pid=1)).duplicate


def test_retry_after_retention_and_crash_returns_the_surviving_copy(tmp_path: Path) -> None:
    """Found by the model test: produce, retention deletes it, the retry is appended again
    (the producer was forgotten), crash. The reloaded state must point at the new copy."""
    plog = open_log(tmp_path / "t-0", retention_bytes=0)
    append(plog, pbatch(0, n=1))
    assert plog.apply_retention() == 1
    retry = append(plog, pbatch(0, n=1))
    assert not retry.duplicate and retry.base_offset == 1
    for segment in plog.segments:  # kill -9: nothing written on the way out
        segment.close()
    again = open_log(tmp_path / "t-0", retention_bytes=0)
    dup = append(again, pbatch(0, n=1))
    assert dup.duplicate and dup.base_offset == 1


def test_idle_producers_expire(tmp_path: Path) -> None:
    clock = FakeClock()
    now = int(clock() * 1000)
    plog = open_log(tmp_path / "t-0", clock, producer_id_expiration_ms=60_000)
    append(plog, make_batch(1, ts=now - 120_000, producer_id=1, producer_epoch=0, base_sequence=0))
    append(plog, make_batch(1, ts=now, producer_id=2, producer_epoch=0, base_sequence=0))
    plog.apply_retention()
    assert set(plog.producer_state.producers) == {2}
