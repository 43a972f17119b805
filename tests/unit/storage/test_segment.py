"""LogSegment: append bookkeeping, index spacing, reads by offset, recovery and cheap load."""
from __future__ import annotations

import struct
from pathlib import Path

from rillet.records import Record, encode_batch, parse_batches, set_offsets
from rillet.storage.segment import LOG_SUFFIX, LogSegment, segment_name

from .helpers import make_batch


def fill(segment: LogSegment, count: int, first_offset: int | None = None) -> list[tuple[int, int]]:
    """Append ``count`` 2-record batches; returns (base_offset, position) of each."""
    offset = segment.base_offset if first_offset is None else first_offset
    placed = []
    for i in range(count):
        data = bytearray(make_batch(2, ts=1000 + i, value_size=100 + i))
        [header] = parse_batches(data)
        set_offsets(data, header, offset, 0)
        placed.append((offset, segment.size))
        segment.append(memoryview(data), [(offset + 1, 1001 + i, header.size)])
        offset += 2
    return placed


def test_append_tracks_offsets_timestamps_and_sparse_index(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 1000, index_interval_bytes=500)
    placed = fill(segment, 20)
    assert segment.next_offset == 1040 and segment.max_timestamp == 1020
    assert segment.offset_of_max_timestamp == 1039 and segment.first_batch_timestamp == 1001
    assert segment.size == (tmp_path / "00000000000000001000.log").stat().st_size
    # roughly one entry per 500 bytes, and never for the first batch
    assert 0 < len(segment.offset_index) <= segment.size // 500
    for offset, position in placed:
        for o in (offset, offset + 1):
            header = segment.find_batch(o)
            assert header is not None and (header.base_offset, header.position) == (offset, position)
    assert segment.find_batch(1040) is None


def test_read_respects_bounds(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    placed = fill(segment, 10)
    ends = [position for _, position in placed[1:]] + [segment.size]
    size0 = ends[0]
    assert len(segment.read(0, ends[2], None, True)) == ends[2]  # exactly three batches
    assert len(segment.read(0, ends[2] - 1, None, True)) == ends[1]  # never a partial batch
    assert [h.base_offset for h in parse_batches(segment.read(4, 1 << 20, 10, True))] == [4, 6, 8]
    assert segment.read(6, 1 << 20, 6, True) == b""
    assert len(segment.read(0, 1, None, True)) == size0
    assert segment.read(0, 1, None, False) == b""


def test_recover_cuts_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    fill(segment, 10)
    entries = len(segment.offset_index)
    full = segment.size
    segment.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(b"\x01" * 100)
    (tmp_path / "00000000000000000000.index").write_bytes(b"garbage")
    again = LogSegment(tmp_path, 0, index_interval_bytes=300)
    assert not again.load()
    assert again.recover() == 100
    assert again.size == full and again.next_offset == 20 and len(again.offset_index) == entries
    again.close()
    cheap = LogSegment(tmp_path, 0, index_interval_bytes=300)
    assert cheap.load() and cheap.next_offset == 20 and cheap.max_timestamp == 1010
    # segment.ms counts from the first batch's timestamp, which sits before the last index entry
    assert len(cheap.offset_index) and cheap.first_batch_timestamp == 1001


def test_load_refuses_an_index_whose_last_entry_misses_its_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    fill(segment, 10)
    segment.seal()
    segment.close()
    index = tmp_path / "00000000000000000000.index"
    entries = bytearray(index.read_bytes())
    assert len(entries) >= 16
    relative, position = struct.unpack_from(">ii", entries, len(entries) - 8)
    # one offset lower: still a well-formed, increasing index, but the batch there ends at `relative`
    struct.pack_into(">ii", entries, len(entries) - 8, relative - 1, position)
    index.write_bytes(entries)
    again = LogSegment(tmp_path, 0, index_interval_bytes=300)
    assert not again.load()
    assert again.recover() == 0 and again.next_offset == 20
    assert again.find_batch(relative).position == position


def batch_at(base_offset: int, count: int) -> bytes:
    return encode_batch([Record(i, 1000 + i, f"key-{i}".encode(), f"value-{i}-".encode() * 5)
                         for i in range(count)], base_offset=base_offset)


def recovered(directory: Path, data: bytes) -> tuple[LogSegment, list[int]]:
    """A segment at base 0 holding ``data`` after recovery, and the base offsets it kept."""
    directory.mkdir(exist_ok=True)
    (directory / segment_name(0, LOG_SUFFIX)).write_bytes(data)
    segment = LogSegment(directory, 0)
    kept: list[int] = []
    segment.recover(lambda header: kept.append(header.base_offset))
    return segment, kept


def test_recover_keeps_every_whole_batch_before_a_torn_tail_at_every_byte(tmp_path: Path) -> None:
    batches = [batch_at(i * 10, i + 1) for i in range(4)]
    whole = b"".join(batches)
    ends = [sum(len(b) for b in batches[:i]) for i in range(5)]
    for cut in range(len(whole) + 1):
        segment, kept = recovered(tmp_path, whole[:cut])
        complete = max(i for i in range(5) if ends[i] <= cut)
        assert segment.size == ends[complete] == segment.log_path.stat().st_size, cut
        assert kept == [i * 10 for i in range(complete)], cut
        segment.close()


def test_recover_stops_at_corruption_and_zeros(tmp_path: Path) -> None:
    a, b, c = (batch_at(offset, 2) for offset in (0, 2, 4))
    bad = bytearray(a + b + c)
    bad[len(a) + 70] ^= 1  # a record byte of the second batch: its CRC no longer matches
    segment, kept = recovered(tmp_path / "flipped", bytes(bad))
    assert segment.size == len(a) and kept == [0] and segment.next_offset == 2
    segment, kept = recovered(tmp_path / "zeros", a + bytes(4096))  # preallocated, never written
    assert segment.size == len(a) and kept == [0]
    segment, kept = recovered(tmp_path / "intact", a + b + c)
    headers = list(segment.scan(len(a), verify=True))
    assert [(h.base_offset, h.position) for h in headers] == [(2, len(a)), (4, len(a) + len(b))]


def test_recover_stops_when_offsets_go_backwards(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    fill(segment, 3)
    fill(segment, 2, first_offset=2)  # overlaps: only a broken writer does this
    assert segment.recover() > 0 and segment.next_offset == 6


def test_truncate_to(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    placed = fill(segment, 10)
    segment.truncate_to(9)  # batch 8..9 and everything after go
    assert segment.next_offset == 8 and segment.size == placed[4][1]
    assert segment.find_batch(8) is None and segment.find_batch(7).base_offset == 6


def test_delete_removes_files(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 7)
    fill(segment, 1)
    segment.delete()
    assert list(tmp_path.iterdir()) == []


def test_a_segment_holds_one_file_descriptor(tmp_path: Path) -> None:
    import os

    before = len(os.listdir("/proc/self/fd"))
    segments = [LogSegment(tmp_path, base * 1000, index_interval_bytes=100) for base in range(5)]
    for segment in segments:
        fill(segment, 5)
        segment.seal()
    assert len(os.listdir("/proc/self/fd")) - before == 5
    assert all(len(s.offset_index) > 0 for s in segments)
    for segment in segments:
        segment.close()
    assert len(os.listdir("/proc/self/fd")) == before
    again = LogSegment(tmp_path, 0, index_interval_bytes=100)
    assert again.load() and len(again.offset_index) == len(segments[0].offset_index)


def _assert_byte_ranges_match_reads(segment: LogSegment, last_offset: int) -> None:
    for offset in range(segment.base_offset, last_offset + 2):
        for max_bytes in (1, 150, 333, 500, 1024, 2500, 1 << 20):
            for max_offset in (None, offset, offset + 1, offset + 3, offset + 9, last_offset):
                for min_one in (True, False):
                    copied = segment.read(offset, max_bytes, max_offset, min_one)
                    position, length = segment.byte_range(offset, max_bytes, max_offset, min_one)
                    assert segment.read_at(position, length) == copied, (
                        offset, max_bytes, max_offset, min_one)


def test_byte_range_is_the_read_for_every_offset_limit_and_bound(tmp_path: Path) -> None:
    """The sendfile range of a fetch, found from the index, is exactly what the copying read
    returns: whole batches, within max_bytes, none at or past max_offset."""
    segment = LogSegment(tmp_path, 100, index_interval_bytes=300)
    fill(segment, 30)
    assert len(segment.offset_index) > 3
    _assert_byte_ranges_match_reads(segment, 159)


def test_byte_range_without_index_entries_walks_the_batches(tmp_path: Path) -> None:
    """An index that lost its entries (rebuilt later, or never written before a crash) only
    makes the walk longer, never the range different."""
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    fill(segment, 12)
    segment.offset_index.reset()
    _assert_byte_ranges_match_reads(segment, 23)
