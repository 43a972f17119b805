"""OffsetIndex and TimeIndex: lookups, truncation, persistence, shape validation."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.storage.index import OffsetIndex, TimeIndex


def test_offset_index_lookup_and_persistence(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", base_offset=100)
    assert index.lookup(150) == 0 and index.last_entry == (100, 0)
    for offset, position in [(110, 4096), (125, 8200), (140, 12300)]:
        index.append(offset, position)
    assert [index.lookup(o) for o in (100, 109, 110, 124, 125, 139, 140, 10**6)] == \
        [0, 0, 4096, 4096, 8200, 8200, 12300, 12300]
    assert (tmp_path / "x.index").stat().st_size == 0  # buffered until persisted
    index.persist()
    assert (tmp_path / "x.index").stat().st_size == 24
    index.close()
    again = OffsetIndex(tmp_path / "x.index", base_offset=100)
    assert again.load(log_size=20000)
    assert again.lookup(130) == 8200 and again.last_entry == (140, 12300)
    again.truncate_to(125)
    assert again.last_entry == (110, 4096) and (tmp_path / "x.index").stat().st_size == 8
    again.append(120, 5000)
    again.truncate_to_position(5000)
    assert len(again) == 1


def test_offset_index_rejects_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    cases = [b"\x00" * 7,                                            # not whole entries
             b"\x00\x00\x00\x05\x00\x00\x10\x00" * 2,                # offsets not increasing
             b"\x00\x00\x00\x05\x00\x01\x00\x00"]                    # position past the log end
    for data in cases:
        path.write_bytes(data)
        index = OffsetIndex(path, base_offset=0)
        assert not index.load(log_size=5000), data
        index.reset()
        assert path.stat().st_size == 0
        index.close()


def test_offset_index_refuses_non_increasing_appends(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", base_offset=0)
    index.append(10, 100)
    with pytest.raises(ValueError):
        index.append(10, 200)


def test_offset_index_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", base_offset=0, max_index_bytes=24)
    for i in range(3):
        assert not index.is_full
        index.append(i + 1, (i + 1) * 100)
    assert index.is_full


def test_time_index(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", base_offset=50)
    assert index.lookup_before(10**12) == 50 and index.last_entry == (-1, 50)
    index.maybe_append(1000, 55)
    index.maybe_append(900, 60)  # not larger: ignored
    index.maybe_append(2000, 70)
    assert len(index) == 2
    # the largest entry strictly below the target: every record up to it is older
    assert [index.lookup_before(t) for t in (500, 1000, 1001, 2000, 2001)] == [50, 50, 55, 55, 70]
    index.close()
    again = TimeIndex(tmp_path / "x.timeindex", base_offset=50)
    assert again.load() and again.last_entry == (2000, 70)
    again.truncate_to(70)
    assert again.last_entry == (1000, 55)
    (tmp_path / "bad.timeindex").write_bytes(b"\x00" * 13)
    assert not TimeIndex(tmp_path / "bad.timeindex", base_offset=0).load()
