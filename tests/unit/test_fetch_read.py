"""apis/fetch.py's reads: records left in the segment files, copied when out of descriptors,
and the end of what was read (for read_committed's aborted transactions) alike either way."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rillet.apis import fetch
from rillet.protocol.file_records import FileRecords

from .storage.helpers import append, make_batch, open_log


def test_a_read_stays_in_the_files_and_ends_where_the_copy_ends(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=3000)
    for i in range(10):
        append(plog, make_batch(1 + i % 3, value_size=200))
    for offset, limit in ((0, 1 << 20), (4, 900), (7, 1)):
        records = fetch._read(plog, offset, limit, min_one_batch=True)
        copied = plog.read(offset, limit)
        assert isinstance(records, FileRecords) and records.read() == copied
        assert fetch._end_of(records, offset) == fetch._end_of(copied, offset) > offset
        records.close()
    assert fetch._read(plog, plog.log_end_offset, 1 << 20, min_one_batch=True) == b""
    assert fetch._end_of(b"", 5) == 5


def test_out_of_descriptors_a_read_is_copied(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    plog = open_log(tmp_path / "t-0")
    for _ in range(3):
        append(plog, make_batch(2))

    def no_more(fd: int) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(os, "dup", no_more)
    assert fetch._read(plog, 0, 1 << 20, min_one_batch=True) == plog.read(0, 1 << 20)
