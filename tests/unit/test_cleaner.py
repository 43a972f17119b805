"""Log compaction on real segment files (PartitionLog on tmp_path, no sockets)."""
from __future__ import annotations

import asyncio
import os
import struct
import time
from pathlib import Path

import pytest

from rillet.defs.broker_config import BrokerConfig
from rillet.protocol.errors import CorruptMessage
from rillet.records import (ATTR_CONTROL, Compression, Record, decode_records, encode_batch,
                            parse_batches)
from rillet.storage.cleaner import (CleaningConfig, LogCleaner, SegmentFile, _LogState,
                                    clean_segments, swap_in_cleaned)
from rillet.storage.log import PartitionLog
from rillet.storage.log_config import LogConfig

TOPIC = "compacted"


class Logs:
    """The one method of LogManager the cleaner uses."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return {(TOPIC, 0): self.plog}


def open_log(path: Path) -> PartitionLog:
    return PartitionLog.open(path / f"{TOPIC}-0", LogConfig(segment_bytes=600,
                                                            cleanup_policy="compact",
                                                            index_interval_bytes=100))


def append(plog: PartitionLog, items: list[tuple[bytes, bytes | None]],
           codec: Compression = Compression.NONE, ts: int = 1000) -> None:
    data = bytearray(encode_batch([Record(i, ts, k, v) for i, (k, v) in enumerate(items)],
                                  compression=codec))
    plog.append(data, parse_batches(data), leader_epoch=0)
    plog.high_watermark = plog.log_end_offset


def read_all(plog: PartitionLog) -> list[Record]:
    return [rec for _, batch in plog.batches() for rec in decode_records(batch)[1]]


def cleaner(plog: PartitionLog, **overrides: str) -> LogCleaner:
    config = BrokerConfig.load(None, {"log.dirs": str(plog.directory.parent)})
    return LogCleaner(Logs(plog), config, lambda topic: dict(overrides))


def write_rounds(plog: PartitionLog, codec: Compression, rounds: int = 6,
                 ts: int = 1000) -> dict[bytes, bytes]:
    last: dict[bytes, bytes] = {}
    for r in range(rounds):
        items = [(f"k{k}".encode(), f"v{r}-{k}".encode() * 3) for k in range(5)]
        append(plog, items, codec, ts=ts)
        last.update(items)
    return last


@pytest.mark.parametrize("codec", list(Compression))
def test_clean_keeps_latest_value_per_key_with_every_codec(tmp_path: Path,
                                                           codec: Compression) -> None:
    plog = open_log(tmp_path)
    last = write_rounds(plog, codec)
    # Roll so every data round sits in a closed segment.
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    assert plog.segment_count >= 3
    before_leo = plog.log_end_offset
    swapped = asyncio.run(cleaner(plog).clean_all())
    assert swapped >= 1
    records = read_all(plog)
    data = [r for r in records if r.key not in (b"filler", b"tail")]
    assert {r.key: r.value for r in data} == last
    assert len(data) == len(last)  # exactly one record per key
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and plog.log_end_offset == before_leo
    # The cleaned log survives a reopen (indexes valid or rebuilt, nothing lost).
    plog.close()
    again = open_log(tmp_path)
    assert [(r.offset, r.key, r.value) for r in read_all(again)] == \
           [(r.offset, r.key, r.value) for r in records]
    again.close()


def test_tombstones_dropped_only_after_delete_retention(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, [(b"a", b"1"), (b"b", b"2")])
    append(plog, [(b"a", None)])
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    c = cleaner(plog, **{"delete.retention.ms": "3600000"})
    asyncio.run(c.clean_all())
    kv = [(r.key, r.value) for r in read_all(plog)]
    assert (b"a", b"1") not in kv and (b"a", None) in kv and (b"b", b"2") in kv
    # Age the segments past delete.retention.ms: the tombstone goes too.
    old = 1_000_000
    for seg in plog.segments[:-1]:
        os.utime(seg.log_path, (old, old))
    asyncio.run(c.clean_log(TOPIC, 0, plog, force=True))
    kv = [(r.key, r.value) for r in read_all(plog)]
    assert all(k != b"a" for k, _ in kv) and (b"b", b"2") in kv
    plog.close()


def test_interrupted_clean_leaves_old_data_and_recovery_removes_leftovers(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    write_rounds(plog, Compression.GZIP)
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    before = [(r.offset, r.key, r.value) for r in read_all(plog)]
    segs = plog.segments[:-1]
    files = [SegmentFile(s.base_offset, s.log_path, s.size,
                         int(os.stat(s.log_path).st_mtime * 1000), s.largest_timestamp)
             for s in segs]
    result = clean_segments(plog.directory, files, CleaningConfig(86400000, 0, 0.5), 0)
    assert result.segments and all(c.log_path.exists() for c in result.segments)
    # "Crash" before the swap: reopen; the .cleaned files are deleted, data unchanged.
    plog.close()
    again = open_log(tmp_path)
    assert not list(again.directory.glob("*.cleaned"))
    assert [(r.offset, r.key, r.value) for r in read_all(again)] == before
    # A crash after the data swap but before the indexes were renamed in: indexes
    # are missing and get rebuilt on open.
    files = [SegmentFile(s.base_offset, s.log_path, s.size,
                         int(os.stat(s.log_path).st_mtime * 1000), s.largest_timestamp)
             for s in again.segments[:-1]]
    result = clean_segments(again.directory, files, CleaningConfig(86400000, 0, 0.5), 0)
    target = result.segments[0]
    again.close()
    seg_log = again.directory / target.log_path.name.removesuffix(".cleaned")
    seg_log.with_suffix(".index").unlink()
    os.replace(target.log_path, seg_log)
    third = open_log(tmp_path)
    after = [(r.offset, r.key, r.value) for r in read_all(third)]
    latest = {k: v for _, k, v in before}
    assert {k: v for _, k, v in after} == latest
    third.close()


@pytest.mark.timeout(30)  # the old walker looped forever on a length that does not advance
@pytest.mark.parametrize("length, attributes", [(-12, ATTR_CONTROL), (-12, 0), (10**6, 0)],
                         ids=["zero-size-control", "zero-size", "past-the-end"])
def test_a_corrupt_batch_length_fails_the_clean_and_keeps_the_segment(
        tmp_path: Path, length: int, attributes: int) -> None:
    plog = open_log(tmp_path)
    write_rounds(plog, Compression.NONE)
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    files = [SegmentFile(s.base_offset, s.log_path, s.size, 0, s.largest_timestamp)
             for s in plog.segments[:-1]]
    first = plog.segments[0].log_path
    plog.close()
    headers = parse_batches(first.read_bytes())
    assert len(headers) >= 2
    with open(first, "r+b") as f:  # garbage in the second batch's length (and attributes)
        f.seek(headers[1].position + 8)
        f.write(struct.pack(">i", length))
        f.seek(headers[1].position + 21)
        f.write(struct.pack(">h", attributes))
    before = first.read_bytes()
    with pytest.raises(CorruptMessage):
        clean_segments(first.parent, files, CleaningConfig(86400000, 0, 0.5), 0)
    # Nothing was cleaned from a valid prefix only: the segment and its tail stay as they were.
    assert first.read_bytes() == before
    assert not list(first.parent.glob("*.cleaned"))


def test_swap_skips_a_segment_that_changed(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    write_rounds(plog, Compression.NONE)
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    segs = plog.segments[:-1]
    files = [SegmentFile(s.base_offset, s.log_path, s.size, 0, s.largest_timestamp)
             for s in segs]
    result = clean_segments(plog.directory, files, CleaningConfig(86400000, 0, 0.5), 0)
    cleaned = result.segments[0]
    object.__setattr__(cleaned, "source_size", cleaned.source_size + 1)
    assert not swap_in_cleaned(plog, cleaned)
    assert not cleaned.log_path.exists()
    plog.close()


def test_fully_superseded_segments_are_removed_and_reads_continue(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for r in range(6):  # the same keys again and again: early segments become empty
        append(plog, [(f"k{k}".encode(), f"v{r}".encode() * 40) for k in range(3)])
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    segments_before = plog.segment_count
    asyncio.run(cleaner(plog).clean_all())
    assert plog.segment_count < segments_before
    assert plog.log_start_offset == 0  # compaction never moves the log start
    records = read_all(plog)
    assert [(r.key, r.value) for r in records if r.key.startswith(b"k")] == \
           [(f"k{k}".encode(), b"v5" * 40) for k in range(3)]
    assert plog.read(1, 1 << 20)  # an offset in a removed range reads on from the next batch
    plog.close()
    again = open_log(tmp_path)
    assert [(r.offset, r.value) for r in read_all(again)] == [(r.offset, r.value)
                                                              for r in records]
    again.close()


def test_policies_ratio_and_compaction_lags(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.update_config(LogConfig(segment_bytes=600, cleanup_policy="compact,delete",
                                 index_interval_bytes=100))
    now = int(time.time() * 1000)
    write_rounds(plog, Compression.NONE, ts=now)
    append(plog, [(b"filler", b"x" * 450)], ts=now)
    append(plog, [(b"tail", b"y")], ts=now)
    size = plog.size_bytes
    # Records are "newer" than min.compaction.lag.ms: nothing is cleanable yet.
    lagging = cleaner(plog, **{"min.compaction.lag.ms": str(10**12)})
    assert asyncio.run(lagging.clean_all()) == 0 and plog.size_bytes == size
    # A ratio no log reaches: no cleaning ...
    strict = cleaner(plog, **{"min.cleanable.dirty.ratio": "1.0"})
    # Only the segments from the second one on are dirty: ratio < 1.0.
    strict._state[(TOPIC, 0)] = _LogState(cleaned_upto=plog.segments[1].base_offset)
    assert asyncio.run(strict.clean_all()) == 0
    # ... unless the dirty data is older than max.compaction.lag.ms.
    overdue = cleaner(plog, **{"min.cleanable.dirty.ratio": "1.0",
                               "max.compaction.lag.ms": "1"})
    overdue._state = dict(strict._state)
    assert asyncio.run(overdue.clean_all()) >= 1 and plog.size_bytes < size
    plog.close()


class DirLogs(Logs):
    def __init__(self, plog: PartitionLog) -> None:
        super().__init__(plog)
        self.log_dirs = [plog.directory.parent]


def test_checkpoint_spares_a_second_clean_after_restart(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    write_rounds(plog, Compression.NONE)
    append(plog, [(b"filler", b"x" * 450)])
    append(plog, [(b"tail", b"y")])
    config = BrokerConfig.load(None, {"log.dirs": str(tmp_path)})
    first = LogCleaner(DirLogs(plog), config, lambda topic: {})
    asyncio.run(first.clean_all())
    assert first.passes == 1
    checkpoint = (tmp_path / "cleaner-offset-checkpoint").read_text().split()
    assert checkpoint[:2] == [TOPIC, "0"] and int(checkpoint[2]) > 0
    # A new cleaner (a restart) reads the checkpoint: nothing is dirty, no pass.
    second = LogCleaner(DirLogs(plog), config, lambda topic: {})
    asyncio.run(second.clean_all())
    assert second.passes == 0
    # Without it, everything counts as dirty again.
    (tmp_path / "cleaner-offset-checkpoint").unlink()
    third = LogCleaner(DirLogs(plog), config, lambda topic: {})
    asyncio.run(third.clean_all())
    assert third.passes == 1
    plog.close()


class ManyLogs:
    def __init__(self, plogs: dict[tuple[str, int], PartitionLog]) -> None:
        self.plogs = plogs

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self.plogs)


@pytest.mark.parametrize("threads", [1, 3])
def test_log_cleaner_threads_bounds_the_logs_cleaned_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    import rillet.storage.cleaner as cleaner_module
    plogs = {}
    for p in range(4):
        plog = PartitionLog.open(tmp_path / f"{TOPIC}-{p}", LogConfig(
            segment_bytes=600, cleanup_policy="compact", index_interval_bytes=100))
        write_rounds(plog, Compression.NONE)
        append(plog, [(b"tail", b"y")])
        plogs[(TOPIC, p)] = plog
    import threading
    running, most = 0, 0
    lock, all_in = threading.Lock(), threading.Event()
    real = cleaner_module.clean_segments

    def counting(*args: object) -> object:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            if running == threads:
                all_in.set()
        all_in.wait(10)   # bounded: give the other slots the chance to start meanwhile
        try:
            return real(*args)
        finally:
            with lock:
                running -= 1
    monkeypatch.setattr(cleaner_module, "clean_segments", counting)
    config = BrokerConfig.load(None, {"log.dirs": str(tmp_path),
                                      "log.cleaner.threads": str(threads)})
    c = LogCleaner(ManyLogs(plogs), config, lambda topic: {})
    assert asyncio.run(c.clean_all()) > 0
    assert c.passes == 4
    assert most == threads
    for plog in plogs.values():
        plog.close()
