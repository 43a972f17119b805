"""Recovery after a crash: torn tails at any byte, corruption, lost or garbage indexes, stray files."""
from __future__ import annotations

import asyncio
import os
import random
import shutil
from pathlib import Path

import pytest

from rillet.records import parse_batches
from rillet.storage.log import PartitionLog

from .helpers import append, make_batch, open_log, read_all_offsets

CONFIG = {"segment_bytes": 2000, "index_interval_bytes": 150}


def build_log(path: Path, batches: int = 12, *, flush: bool = False) -> tuple[PartitionLog, list[int]]:
    """A log over several segments; returns it and the end offset after each batch."""
    plog = open_log(path, **CONFIG)
    ends = []
    for i in range(batches):
        append(plog, make_batch(1 + i % 3, value_size=90 + 13 * i, tag=str(i)))
        ends.append(plog.log_end_offset)
    if flush:
        asyncio.run(plog.flush())
    return plog, ends


def active_log_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


def batch_boundaries(log_file: Path) -> list[int]:
    data = log_file.read_bytes()
    return [0] + [h.position + h.size for h in parse_batches(data)] if data else [0]


def cut_positions(size: int, boundaries: list[int], seed: int = 11) -> list[int]:
    """Bytes through the first batch, the tail of the last one, both sides of every boundary, random ones.

    (LogSegment recovery is tested at literally every byte in test_segment.py;
    this keeps the file-level version fast: each cut copies and reopens a log.)
    """
    cuts = set(range(0, min(size, boundaries[1] if len(boundaries) > 1 else size) + 1, 5))
    cuts |= set(range(max(0, size - 70), size + 1))
    for b in boundaries:
        cuts |= {b - 1, b, b + 1}
    cuts |= set(random.Random(seed).sample(range(size + 1), min(size + 1, 30)))
    return sorted(c for c in cuts if 0 <= c <= size)


def test_torn_tail_at_many_bytes_of_the_active_segment(tmp_path: Path) -> None:
    source = tmp_path / "src-0"
    plog, _ = build_log(source)
    plog.close()
    log_file = active_log_file(source)
    full = log_file.read_bytes()
    active_base = int(log_file.name.split(".")[0])
    boundaries = batch_boundaries(log_file)
    offsets_by_end = {}
    for header in parse_batches(full):
        offsets_by_end[header.position + header.size] = header.next_offset
    offsets_by_end[0] = active_base
    work = tmp_path / "work-0"
    for n, cut in enumerate(cut_positions(len(full), boundaries)):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(source, work)
        with open(work / log_file.name, "r+b") as f:
            f.truncate(cut)
        recovered = open_log(work, **CONFIG)
        kept = max(b for b in boundaries if b <= cut)
        assert recovered.log_end_offset == offsets_by_end[kept], cut
        assert (work / log_file.name).stat().st_size == kept
        assert read_all_offsets(recovered) == list(range(recovered.log_end_offset))
        # the log keeps working: new appends get the next dense offsets, survive a reopen
        info = append(recovered, make_batch(2))
        assert info.base_offset == offsets_by_end[kept]
        recovered.close()
        if n % 4 == 0:  # and a second restart (every few cuts: each reopen costs)
            assert read_all_offsets(open_log(work, **CONFIG)) == list(range(info.last_offset + 1))


def test_torn_write_across_a_roll(tmp_path: Path) -> None:
    """kill -9 right after a roll: the new segment file exists but is empty or partly written."""
    plog, ends = build_log(tmp_path / "t-0")
    plog.close()
    newest = active_log_file(tmp_path / "t-0")
    for cut in (0, 5, 61):
        with open(newest, "r+b") as f:
            f.truncate(min(cut, newest.stat().st_size))
        recovered = open_log(tmp_path / "t-0", **CONFIG)
        assert recovered.log_end_offset == int(newest.name.split(".")[0])
        assert read_all_offsets(recovered) == list(range(recovered.log_end_offset))
        recovered.close()


def test_crc_corruption_mid_active_segment_truncates_there(tmp_path: Path) -> None:
    plog, _ = build_log(tmp_path / "t-0")
    plog.close()
    log_file = active_log_file(tmp_path / "t-0")
    headers = parse_batches(log_file.read_bytes())
    assert len(headers) >= 3
    victim = headers[1]
    with open(log_file, "r+b") as f:
        f.seek(victim.position + victim.size - 5)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert recovered.log_end_offset == victim.base_offset
    assert read_all_offsets(recovered) == list(range(victim.base_offset))


def test_corruption_in_an_unflushed_older_segment_drops_everything_after(tmp_path: Path) -> None:
    plog, _ = build_log(tmp_path / "t-0")
    assert plog.segment_count >= 3
    first = plog.segments[0]
    plog.close()
    headers = parse_batches(first.log_path.read_bytes())
    victim = headers[-1]
    with open(first.log_path, "r+b") as f:
        f.seek(victim.position + 70)
        f.write(b"\xde\xad")
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert recovered.segment_count == 1
    assert recovered.log_end_offset == victim.base_offset
    assert read_all_offsets(recovered) == list(range(victim.base_offset))


def test_garbage_and_zeros_after_the_last_batch(tmp_path: Path) -> None:
    plog, ends = build_log(tmp_path / "t-0")
    plog.close()
    log_file = active_log_file(tmp_path / "t-0")
    good = log_file.stat().st_size
    for junk in (bytes(4096), random.Random(1).randbytes(777)):
        with open(log_file, "ab") as f:
            f.write(junk)
        recovered = open_log(tmp_path / "t-0", **CONFIG)
        assert recovered.log_end_offset == ends[-1]
        assert log_file.stat().st_size == good
        recovered.close()


@pytest.mark.parametrize("flushed", [False, True], ids=["unflushed", "flushed"])
def test_missing_indexes_are_rebuilt(tmp_path: Path, flushed: bool) -> None:
    plog, ends = build_log(tmp_path / "t-0", flush=flushed)
    expected_entries = [len(s.offset_index) for s in plog.segments]
    plog.close()
    for index in list((tmp_path / "t-0").glob("*.index")) + list((tmp_path / "t-0").glob("*.timeindex")):
        index.unlink()
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert [len(s.offset_index) for s in recovered.segments] == expected_entries
    assert read_all_offsets(recovered) == list(range(ends[-1]))
    assert recovered.offset_for_timestamp(0) == (0, 1_700_000_000_000)


@pytest.mark.parametrize("flushed", [False, True], ids=["unflushed", "flushed"])
def test_garbage_indexes_are_rebuilt(tmp_path: Path, flushed: bool) -> None:
    plog, ends = build_log(tmp_path / "t-0", flush=flushed)
    plog.close()
    rng = random.Random(7)
    for i, index in enumerate(sorted((tmp_path / "t-0").glob("*index"))):
        if i % 3 == 0:
            index.write_bytes(rng.randbytes(rng.randrange(1, 100)))  # random size and content
        elif i % 3 == 1:
            index.write_bytes(b"\x00\x00\x00\x01\x7f\xff\xff\xff" * 2)  # well-formed, points past the end
        else:
            index.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10")  # points inside a batch
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert read_all_offsets(recovered) == list(range(ends[-1]))
    for offset in range(ends[-1]):
        header = parse_batches(recovered.read(offset, 1))[0]
        assert header.base_offset <= offset <= header.last_offset


def test_flushed_log_reopens_cheaply_and_correctly(tmp_path: Path) -> None:
    plog, ends = build_log(tmp_path / "t-0", flush=True)
    assert plog.recovery_point == ends[-1]
    plog.close()
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert recovered.recovery_point == ends[-1]
    assert read_all_offsets(recovered) == list(range(ends[-1]))
    assert [s.max_timestamp for s in recovered.segments] == [s.max_timestamp for s in plog.segments]


def test_stray_files_are_removed(tmp_path: Path) -> None:
    plog, ends = build_log(tmp_path / "t-0")
    plog.close()
    directory = tmp_path / "t-0"
    strays = ["00000000000000000000.log.deleted", "00000000000000000099.log.swap",
              "00000000000000000005.log.cleaned", "00000000000000012345.index",
              "00000000000000012345.timeindex", "recovery-point.tmp"]
    for name in strays:
        (directory / name).write_bytes(b"junk")
    recovered = open_log(directory, **CONFIG)
    for name in strays:
        assert not (directory / name).exists(), name
    assert read_all_offsets(recovered) == list(range(ends[-1]))


def test_random_cuts_with_producer_state_and_epochs(tmp_path: Path) -> None:
    """Idempotent batches under several epochs, torn at random bytes: state matches what survived."""
    source = tmp_path / "src-0"
    plog = open_log(source, **CONFIG)
    seq = 0
    for i in range(15):
        append(plog, make_batch(2, producer_id=9, producer_epoch=0, base_sequence=seq), epoch=i // 5)
        seq += 2
    plog.close()
    for snapshot in source.glob("*.snapshot"):
        snapshot.unlink()  # force the rebuild from batch headers
    log_file = active_log_file(source)
    size = log_file.stat().st_size
    rng = random.Random(3)
    work = tmp_path / "work-0"
    for cut in sorted(rng.sample(range(size + 1), 25)):
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(source, work)
        with open(work / log_file.name, "r+b") as f:
            f.truncate(cut)
        recovered = open_log(work, **CONFIG)
        leo = recovered.log_end_offset
        # the producer's next sequence is exactly the number of records that survived
        entry = recovered.producer_state.producers[9]
        assert entry.last_seq == leo - 1
        assert recovered.latest_epoch == (leo - 1) // 10
        info = append(recovered, make_batch(2, producer_id=9, producer_epoch=0, base_sequence=leo))
        assert info.base_offset == leo and not info.duplicate
        recovered.close()


def test_clean_shutdown_reopens_without_rescanning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rillet.storage.segment import LogSegment

    plog, ends = build_log(tmp_path / "t-0", flush=True)
    plog.close()

    def no_rescan(self: LogSegment, on_batch: object = None) -> int:
        raise AssertionError(f"segment {self.base_offset} was rescanned")

    monkeypatch.setattr(LogSegment, "recover", no_rescan)
    again = open_log(tmp_path / "t-0", **CONFIG)
    assert read_all_offsets(again) == list(range(ends[-1]))


def test_torn_tail_after_a_clean_shutdown_is_still_cut(tmp_path: Path) -> None:
    plog, ends = build_log(tmp_path / "t-0", flush=True)
    plog.close()
    log_file = active_log_file(tmp_path / "t-0")
    boundaries = batch_boundaries(log_file)
    with open(log_file, "r+b") as f:
        f.truncate(boundaries[-1] - 10)
    recovered = open_log(tmp_path / "t-0", **CONFIG)
    assert log_file.stat().st_size == boundaries[-2]
    assert read_all_offsets(recovered) == list(range(recovered.log_end_offset))
    assert recovered.log_end_offset < ends[-1]


def test_truncation_lowers_the_persisted_recovery_point(tmp_path: Path) -> None:
    plog, ends = build_log(tmp_path / "t-0", flush=True)
    plog.truncate_to(ends[2])
    append(plog, make_batch(2))  # unflushed data below the old recovery point
    assert int((tmp_path / "t-0" / "recovery-point").read_text()) <= ends[2]
