"""PartitionLog: append, read, roll, retention, timestamp lookup, epochs, truncation, flush."""
from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest

import rillet.storage.offset_files as log_module
from rillet.protocol.errors import (InvalidRecord, KafkaStorageError, MessageTooLarge, OffsetOutOfRange,
                                   RecordListTooLarge)
from rillet.records import Compression, decode_records, parse_batches
from rillet.storage.log import LogConfig, PartitionLog

from .helpers import FakeClock, append, make_batch, open_log, read_all_offsets


def test_append_assigns_dense_offsets_and_reads_back(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    infos = [append(plog, make_batch(n, tag=str(n))) for n in (1, 3, 5)]
    assert [(i.base_offset, i.last_offset) for i in infos] == [(0, 0), (1, 3), (4, 8)]
    assert plog.log_end_offset == 9 and plog.high_watermark == 9
    assert read_all_offsets(plog) == list(range(9))
    # a read from the middle of a batch starts with that whole batch
    data = plog.read(2, 1 << 20)
    headers = parse_batches(data)
    assert [h.base_offset for h in headers] == [1, 4]
    assert decode_records(data[: headers[0].size])[1][1].key == b"k31"


def test_two_batches_in_one_append(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    info = append(plog, make_batch(2), make_batch(3, compression=Compression.ZSTD))
    assert (info.base_offset, info.last_offset) == (0, 4)
    assert read_all_offsets(plog) == list(range(5))


def test_read_bounds(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for _ in range(4):
        append(plog, make_batch(2, value_size=400))
    size = parse_batches(plog.read(0, 1 << 20))[0].size
    assert plog.read(8, 100) == b""  # at the log end
    with pytest.raises(OffsetOutOfRange):
        plog.read(9, 100)
    with pytest.raises(OffsetOutOfRange):
        plog.read(-1, 100)
    # max_bytes cuts at whole batches
    assert len(plog.read(0, size * 2 + 10)) == size * 2
    # the first batch comes whole even when larger than max_bytes...
    assert len(plog.read(0, 10)) == size
    # ...unless the caller says otherwise
    assert plog.read(0, 10, min_one_batch=False) == b""
    # max_offset (e.g. the high watermark) is an exclusive bound on base offsets
    assert [h.base_offset for h in parse_batches(plog.read(0, 1 << 20, max_offset=4))] == [0, 2]
    assert [h.base_offset for h in parse_batches(plog.read(0, 1 << 20, max_offset=5))] == [0, 2, 4]
    assert plog.read(4, 1 << 20, max_offset=4) == b""


def test_batches_walks_the_whole_log_in_small_chunks(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=2000)
    for i in range(12):
        append(plog, make_batch(3, value_size=200, tag=str(i)))
    walked = list(plog.batches(chunk_bytes=1))  # one batch per read, across segment rolls
    assert plog.segment_count > 2
    assert [h.base_offset for h, _ in walked] == list(range(0, 36, 3))
    for header, batch in walked:
        assert len(batch) == header.size
        assert [r.offset for r in decode_records(batch)[1]] == list(
            range(header.base_offset, header.last_offset + 1))


def test_roll_by_size_and_reads_across_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=2000, index_interval_bytes=300)
    for i in range(30):
        append(plog, make_batch(2, value_size=200, tag=str(i)))
    assert plog.segment_count > 5
    for segment in plog.segments:
        assert segment.size <= 2000
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert all(len(n) == len("00000000000000000000.log") for n in names)
    assert read_all_offsets(plog) == list(range(60))
    for offset in range(60):  # every offset finds the batch holding it through the index
        header = parse_batches(plog.read(offset, 1))[0]
        assert header.base_offset <= offset <= header.last_offset


def test_batch_larger_than_segment_gets_its_own_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1500)
    append(plog, make_batch(1, value_size=100))
    append(plog, make_batch(1, value_size=1400))
    append(plog, make_batch(1, value_size=100))
    assert plog.segment_count == 3
    with pytest.raises(RecordListTooLarge):
        append(plog, make_batch(1, value_size=1600))


def test_roll_by_time(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock, segment_ms=60_000)
    now = int(clock() * 1000)
    append(plog, make_batch(1, ts=now))
    append(plog, make_batch(1, ts=now + 30_000))
    assert plog.segment_count == 1
    append(plog, make_batch(1, ts=now + 61_000))  # measured from the first batch's timestamp
    assert plog.segment_count == 2
    plog.maybe_roll()
    assert plog.segment_count == 2
    clock.advance_ms(200_000)
    plog.maybe_roll()  # idle segment older than segment.ms
    assert plog.segment_count == 3 and plog.segments[-1].is_empty
    assert read_all_offsets(plog) == [0, 1, 2]


def test_message_too_large(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", max_message_bytes=1000)
    with pytest.raises(MessageTooLarge):
        append(plog, make_batch(1, value_size=2000))
    assert plog.log_end_offset == 0
    append(plog, make_batch(1, value_size=100))
    assert plog.log_end_offset == 1


def test_log_append_time(tmp_path: Path) -> None:
    clock = FakeClock(2_000_000_000.0)
    plog = open_log(tmp_path / "t-0", clock, message_timestamp_type="LogAppendTime")
    info = append(plog, make_batch(3, ts=5))
    assert info.log_append_time == 2_000_000_000_000
    header, records = decode_records(plog.read(0, 1 << 20))
    assert header.timestamp_type == 1
    assert [r.timestamp for r in records] == [2_000_000_000_000] * 3
    assert plog.offset_for_timestamp(1_000) == (0, 2_000_000_000_000)


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=500)
    for i in range(40):
        append(plog, make_batch(2, value_size=150, ts=1000 + i * 10))
    plog.close()
    again = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=500)
    assert again.log_end_offset == 80 and again.high_watermark == 80
    assert again.segment_count == plog.segment_count
    assert read_all_offsets(again) == list(range(80))
    info = append(again, make_batch(1))
    assert info.base_offset == 80


def test_offset_for_timestamp_matches_brute_force(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=2500, index_interval_bytes=200)
    # Timestamps mostly rise but jump back now and then, as producers' clocks do.
    stamps = []
    for i in range(50):
        base = 10_000 + i * 100 - (700 if i % 7 == 3 else 0)
        append(plog, make_batch(3, ts=base, value_size=120))
        stamps += [(plog.log_end_offset - 3 + j, base + j) for j in range(3)]

    def expected(target: int) -> tuple[int, int] | None:
        hits = [(o, t) for o, t in stamps if t >= target]
        return min(hits) if hits else None

    for target in [0, 9_999, 10_000, 10_001, 10_150, 12_345, 13_000, 14_902, 14_903, 99_999]:
        assert plog.offset_for_timestamp(target) == expected(target), target
    plog.close()
    again = open_log(tmp_path / "t-0", segment_bytes=2500, index_interval_bytes=200)
    for target in range(9_000, 15_200, 37):
        assert again.offset_for_timestamp(target) == expected(target), target


def test_max_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1000)
    assert plog.max_timestamp() is None
    for ts in (100, 900, 300, 500):
        append(plog, make_batch(3, ts=ts, value_size=200))
    assert plog.max_timestamp() == (5, 902)
    plog.close()
    assert open_log(tmp_path / "t-0", segment_bytes=1000).max_timestamp() == (5, 902)


def test_leader_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    assert plog.latest_epoch == -1 and plog.end_offset_for_epoch(0) == (-1, -1)
    append(plog, make_batch(2), epoch=0)
    append(plog, make_batch(2), epoch=0)
    append(plog, make_batch(3), epoch=2)
    append(plog, make_batch(1), epoch=5)
    assert plog.latest_epoch == 5
    assert plog.end_offset_for_epoch(0) == (0, 4)
    assert plog.end_offset_for_epoch(1) == (0, 4)
    assert plog.end_offset_for_epoch(2) == (2, 7)
    assert plog.end_offset_for_epoch(4) == (2, 7)
    assert plog.end_offset_for_epoch(5) == (5, 8)
    assert plog.end_offset_for_epoch(6) == (-1, -1)
    header = parse_batches(plog.read(4, 1))[0]
    assert header.partition_leader_epoch == 2  # stamped into the stored batch
    plog.close()
    again = open_log(tmp_path / "t-0")
    assert again.latest_epoch == 5 and again.end_offset_for_epoch(3) == (2, 7)
    again.truncate_to(7)
    assert again.latest_epoch == 2 and again.end_offset_for_epoch(2) == (2, 7)
    again.truncate_to(5)  # inside the first epoch-2 batch: that batch and its epoch go
    assert again.log_end_offset == 4 and again.latest_epoch == 0


def test_leader_epochs_rebuilt_from_batches_when_checkpoint_lost(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, make_batch(2), epoch=1)
    append(plog, make_batch(2), epoch=3)
    plog.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    again = open_log(tmp_path / "t-0")
    assert again.end_offset_for_epoch(1) == (1, 2) and again.latest_epoch == 3


def test_truncate_to(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1500, index_interval_bytes=200)
    for i in range(20):
        append(plog, make_batch(2, value_size=150))
    segments = plog.segment_count
    plog.truncate_to(23)  # inside batch 22..23: the whole batch goes
    assert plog.log_end_offset == 22 and plog.high_watermark == 22
    assert plog.segment_count < segments
    assert read_all_offsets(plog) == list(range(22))
    assert append(plog, make_batch(1)).base_offset == 22
    plog.close()
    again = open_log(tmp_path / "t-0", segment_bytes=1500, index_interval_bytes=200)
    assert read_all_offsets(again) == list(range(23))
    again.truncate_to(0)
    assert again.log_end_offset == 0 and again.segment_count == 1
    assert append(again, make_batch(2)).base_offset == 0


def test_retention_by_size(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1200, retention_bytes=3000)
    for _ in range(20):
        append(plog, make_batch(1, value_size=400))
    before = plog.segment_count
    deleted = plog.apply_retention()
    assert deleted > 0 and plog.segment_count == before - deleted
    assert plog.size_bytes <= 3000 + 1200
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 1000)
    assert read_all_offsets(plog) == list(range(plog.log_start_offset, 20))
    assert append(plog, make_batch(1)).log_start_offset == plog.log_start_offset
    plog.close()
    assert open_log(tmp_path / "t-0").log_start_offset == plog.log_start_offset


def test_retention_by_time_rolls_an_expired_active_segment(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock, retention_ms=60_000)
    now = int(clock() * 1000)
    append(plog, make_batch(2, ts=now - 120_000))
    append(plog, make_batch(2, ts=now - 90_000))
    assert plog.apply_retention() == 1  # the only (active) segment was all expired
    assert plog.log_start_offset == 4 == plog.log_end_offset and plog.segment_count == 1
    assert plog.read(4, 100) == b""
    append(plog, make_batch(1, ts=now))
    assert plog.apply_retention() == 0
    clock.advance_ms(61_000)
    assert plog.apply_retention() == 1
    assert plog.log_start_offset == 5


def test_retention_keeps_data_above_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1000, retention_bytes=0)
    for _ in range(5):
        append(plog, make_batch(1, value_size=700))
    plog.high_watermark = 2
    plog.apply_retention()
    assert plog.log_start_offset == 2


def test_retention_off_for_compact_policy(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1000, retention_bytes=0, cleanup_policy="compact")
    for _ in range(5):
        append(plog, make_batch(1, value_size=700))
    assert plog.apply_retention() == 0


def test_flush_messages_one_syncs_every_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = log_module.sync_files

    def counting(*args: object) -> None:
        calls.append(len(args[1]))  # type: ignore[arg-type]
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(log_module, "sync_files", counting)

    async def scenario() -> None:
        plog = open_log(tmp_path / "t-0", flush_messages=1)
        for _ in range(3):
            append(plog, make_batch(2))
            await plog.maybe_flush()
            assert plog.recovery_point == plog.log_end_offset
        # concurrent flushes of the same data share one fsync round
        append(plog, make_batch(2))
        before = len(calls)
        await asyncio.gather(*(plog.flush() for _ in range(5)))
        assert len(calls) == before + 1
        plog.close()

    asyncio.run(scenario())
    assert len(calls) == 4


def test_default_policy_does_not_fsync_on_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(log_module, "sync_files", lambda *a: calls.append(a))

    async def scenario() -> None:
        plog = open_log(tmp_path / "t-0")
        append(plog, make_batch(2))
        await plog.maybe_flush()
        assert not calls and plog.recovery_point == 0
        assert plog.flush_due(10**15) is False  # flush.ms defaults to "never"
        plog.close()

    asyncio.run(scenario())


def test_flush_ms_due(tmp_path: Path) -> None:
    clock = FakeClock()
    plog = open_log(tmp_path / "t-0", clock, flush_ms=1000)
    assert not plog.flush_due(int(clock() * 1000) + 5000)  # nothing written
    append(plog, make_batch(1))
    assert not plog.flush_due(int(clock() * 1000) + 10)
    assert plog.flush_due(int(clock() * 1000) + 1000)
    asyncio.run(plog.flush())
    assert not plog.flush_due(int(clock() * 1000) + 5000)


def test_config_from_properties_and_update(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"segment.bytes": "2048", "retention.ms": -1,
                                        "message.timestamp.type": "LogAppendTime", "unknown.key": "x"})
    assert config.segment_bytes == 2048 and config.retention_ms == -1
    assert config.message_timestamp_type == "LogAppendTime" and config.flush_messages == 2**63 - 1
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.update_config(config)
    assert plog.config.segment_bytes == 2048


def test_delete_removes_directory(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "my-topic-3")
    append(plog, make_batch(1))
    plog.delete()
    assert not (tmp_path / "my-topic-3").exists()


def test_read_slices_point_at_the_bytes_read_returns(tmp_path: Path) -> None:
    import os

    plog = open_log(tmp_path / "t-0", segment_bytes=1500)
    for _ in range(6):
        append(plog, make_batch(2, value_size=300))
    for offset in range(12):
        [(fd, position, length)] = plog.read_slices(offset, 1 << 20)
        assert os.pread(fd, length, position) == plog.read(offset, 1 << 20)
    assert plog.read_slices(12, 100) == []


def test_append_replicated_keeps_leader_offsets_and_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0", segment_bytes=1500)
    append(leader, make_batch(2), epoch=1)
    append(leader, make_batch(3, producer_id=4, producer_epoch=0, base_sequence=0), epoch=1)
    append(leader, make_batch(2), epoch=3)
    follower = open_log(tmp_path / "follower-0", segment_bytes=1500)
    offset = 0
    while offset < leader.log_end_offset:  # what a follower fetcher would do
        data = leader.read(offset, 700)
        headers = parse_batches(data, strict=False)
        follower.append_replicated(data, headers)
        offset = headers[-1].next_offset
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.log_end_offset == 7 and follower.latest_epoch == 3
    assert follower.end_offset_for_epoch(1) == (1, 5)
    assert follower.producer_state.producers[4].last_seq == 2
    with pytest.raises(InvalidRecord):  # a batch the follower already has
        data = leader.read(0, 1)
        follower.append_replicated(data, parse_batches(data))


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, make_batch(3, producer_id=1, producer_epoch=0, base_sequence=0), epoch=2)
    plog.truncate_fully_and_start_at(1000)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (1000, 1000, 1000)
    assert plog.latest_epoch == -1 and not plog.producer_state.producers
    assert append(plog, make_batch(1)).base_offset == 1000
    plog.close()
    again = open_log(tmp_path / "t-0")
    assert (again.log_start_offset, again.log_end_offset) == (1000, 1001)


def test_read_slices_match_read_under_every_bound(tmp_path: Path) -> None:
    import os

    plog = open_log(tmp_path / "t-0", segment_bytes=2500, index_interval_bytes=200)
    for i in range(12):
        append(plog, make_batch(1 + i % 3, value_size=150 + 20 * i))
    for offset in range(0, plog.log_end_offset, 2):
        for max_bytes in (1, 300, 700, 1 << 20):
            for max_offset in (None, offset + 1, offset + 5):
                for min_one in (True, False):
                    want = plog.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
                    slices = plog.read_slices(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
                    got = b"".join(os.pread(fd, length, pos) for fd, pos, length in slices)
                    assert got == want, (offset, max_bytes, max_offset, min_one)


def test_truncation_during_a_flush_does_not_leave_the_flush_waiting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = threading.Event(), threading.Event()
    real = log_module.sync_files

    def held_once(*args: object) -> None:
        if not entered.is_set():  # hold the first fsync so the log can change under it
            entered.set()
            release.wait(10)
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(log_module, "sync_files", held_once)

    async def scenario() -> None:
        plog = open_log(tmp_path / "t-0")
        append(plog, make_batch(2))
        append(plog, make_batch(2))
        flushing = asyncio.ensure_future(plog.flush())  # waits for offset 4 to be on disk
        assert await asyncio.to_thread(entered.wait, 10)
        plog.truncate_to(2)  # a new leader's log is shorter: offsets 2..3 are gone
        release.set()
        await asyncio.wait_for(flushing, 10)  # done once everything that is left is synced
        assert plog.recovery_point == plog.log_end_offset == 2
        plog.close()

    asyncio.run(scenario())


def test_a_failed_flush_leaves_every_file_it_held_for_the_next_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, object]] = []
    real = log_module.sync_files

    def failing_once(directory: Path, fds: list[int], sync_dir: bool, epochs: Path | None,
                     recovery_point: int | None) -> None:
        calls.append((len(fds), epochs))
        if len(calls) == 1:
            for fd in fds:
                os.close(fd)
            raise OSError(errno.EIO, "injected fsync failure")
        real(directory, fds, sync_dir, epochs, recovery_point)

    monkeypatch.setattr(log_module, "sync_files", failing_once)

    async def scenario() -> None:
        plog = open_log(tmp_path / "t-0", index_interval_bytes=100)
        for _ in range(4):  # data, index entries and a leader epoch entry: four files to sync
            append(plog, make_batch(2), epoch=3)
        with pytest.raises(KafkaStorageError):
            await plog.flush()
        assert plog.recovery_point == 0
        await plog.flush()
        assert plog.recovery_point == plog.log_end_offset
        plog.close()

    asyncio.run(scenario())
    (held, epochs), retried = calls
    assert held == 3 and epochs is not None  # the .log, .index, .timeindex and the epoch file
    assert retried == (held, epochs)


def test_a_restart_starts_at_the_checkpointed_high_watermark(tmp_path: Path) -> None:
    """A replica's log may hold records never replicated: after a restart its high watermark
    is the last checkpointed one, not its log end (without a checkpoint: its log start, as
    Kafka; a leader raises it again from what its ISR holds)."""
    plog = open_log(tmp_path / "t-0")
    append(plog, make_batch(5))
    plog.checkpoint_high_watermark()
    data = bytearray(make_batch(3))
    plog.append(data, parse_batches(data), leader_epoch=0)   # not replicated: HW stays at 5
    asyncio.run(plog.flush())
    plog.close()
    reopened = open_log(tmp_path / "t-0")
    assert (reopened.log_end_offset, reopened.high_watermark) == (8, 5)
    reopened.close()
    (tmp_path / "t-0" / "high-watermark").unlink()
    assert open_log(tmp_path / "t-0").high_watermark == 0


def test_delete_records_moves_the_log_start_and_survives_a_restart(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, make_batch(10))
    plog.high_watermark = 6
    assert plog.advance_log_start(8) and plog.log_start_offset == 6, "never past the HW"
    with pytest.raises(OffsetOutOfRange):
        plog.read(2, 1 << 20)
    assert not plog.advance_log_start(3), "it never moves back"
    plog.close()
    assert open_log(tmp_path / "t-0").log_start_offset == 6
