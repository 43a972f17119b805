"""LogManager: loading partition dirs, create/delete, retention and flush.ms in the background loop."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from rillet.metadata.directories import LOST
from rillet.protocol.errors import KafkaStorageError
from rillet.records import parse_batches
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager, parse_partition_dir

from .helpers import FakeClock, append, make_batch, read_all_offsets


def test_parse_partition_dir() -> None:
    assert parse_partition_dir("my-topic-3") == ("my-topic", 3)
    assert parse_partition_dir("t-0") == ("t", 0)
    assert parse_partition_dir("a.b_c-12") == ("a.b_c", 12)
    for name in ("__cluster_metadata-0", "no_partition", "t-x", "-3", "t-0.abcd-delete"):
        assert parse_partition_dir(name) is None, name


def test_create_is_idempotent_and_spreads_over_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    manager.load_logs(lambda t, p: LogConfig())
    logs = [manager.create("orders", p, LogConfig()) for p in range(4)]
    assert manager.create("orders", 0, LogConfig()) is logs[0]
    assert sorted(len(list(d.iterdir())) for d in dirs) == [2, 2]
    assert set(manager.logs()) == {("orders", p) for p in range(4)}
    assert manager.get("orders", 9) is None


def test_load_logs_reopens_existing_partitions_only(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.load_logs(lambda t, p: LogConfig())
    append(manager.create("my-topic", 1, LogConfig()), make_batch(3))
    asyncio.run(manager.close())
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    (tmp_path / "old-0.0123abcd-delete").mkdir()
    seen = []
    again = LogManager([tmp_path])
    again.load_logs(lambda t, p: seen.append((t, p)) or LogConfig())
    assert seen == [("my-topic", 1)]
    assert read_all_offsets(again.get("my-topic", 1)) == [0, 1, 2]
    assert not (tmp_path / "old-0.0123abcd-delete").exists()


def test_delete_topic_removes_its_files(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([tmp_path])
        manager.load_logs(lambda t, p: LogConfig())
        for p in range(2):
            append(manager.create("gone", p, LogConfig()), make_batch(1))
        append(manager.create("gone-too", 0, LogConfig()), make_batch(1))
        manager.delete_topic("gone")
        assert set(manager.logs()) == {("gone-too", 0)}
        await manager.close()

    asyncio.run(scenario())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gone-too-0"]


def test_run_applies_retention_and_flush_ms(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        manager = LogManager([tmp_path], clock=clock)
        manager.load_logs(lambda t, p: LogConfig())
        config = LogConfig(segment_bytes=1000, retention_bytes=1500, flush_ms=50)
        plog = manager.create("t", 0, config)
        for _ in range(6):
            append(plog, make_batch(1, value_size=600))
        stop = asyncio.Event()
        runner = asyncio.create_task(manager.run(stop, retention_check_interval_ms=20,
                                                 flush_check_interval_ms=10))
        for _ in range(100):
            clock.advance_ms(100)
            await asyncio.sleep(0.02)
            if plog.log_start_offset > 0 and plog.recovery_point == plog.log_end_offset:
                break
        stop.set()
        await asyncio.wait_for(runner, 5)
        assert plog.log_start_offset > 0
        assert plog.size_bytes <= 1500 + 1000
        assert plog.recovery_point == plog.log_end_offset  # flush.ms elapsed: flushed
        await manager.close()

    asyncio.run(scenario())


def test_needs_a_log_dir() -> None:
    with pytest.raises(ValueError):
        LogManager([])


def test_a_failed_log_dir_goes_offline_with_all_its_partitions(tmp_path: Path) -> None:
    from rillet.protocol.errors import KafkaStorageError
    bad, good = tmp_path / "bad", tmp_path / "good"
    manager = LogManager([bad, good])
    manager.load_logs(lambda t, p: LogConfig())
    logs = {p: manager.create("t", p, LogConfig()) for p in range(4)}
    heard = []
    manager.failures.subscribe(heard.append)
    on_bad = sorted(p for p, plog in logs.items() if plog.directory.parent == bad)

    manager.fail_dir(bad, OSError(5, "Input/output error"))
    manager.fail_dir(bad, OSError(5, "again"))   # told once
    assert [(f.log_dir, sorted(f.partitions)) for f in heard] == [
        (bad, [("t", p) for p in on_bad])]
    assert manager.failures.is_offline(bad) and not manager.failures.is_offline(good)
    for p in on_bad:
        assert manager.get("t", p) is None and manager.offline_dir_of("t", p) == bad
        with pytest.raises(KafkaStorageError):
            manager.create("t", p, LogConfig())    # never again in another dir
        with pytest.raises(KafkaStorageError):
            append(logs[p], make_batch(1))
    # The other dir goes on, and takes every new partition.
    assert manager.create("t", 9, LogConfig()).directory.parent == good
    survivor = next(p for p in range(4) if p not in on_bad)
    append(manager.get("t", survivor), make_batch(2))
    # A dropped replica (its topic deleted) is no longer offline here.
    manager.delete_partition("t", on_bad[0])
    assert manager.offline_dir_of("t", on_bad[0]) is None


def test_every_log_dir_offline_refuses_new_partitions(tmp_path: Path) -> None:
    from rillet.protocol.errors import KafkaStorageError
    manager = LogManager([tmp_path / "only"])
    manager.load_logs(lambda t, p: LogConfig())
    manager.fail_dir(tmp_path / "only", OSError(5, "Input/output error"))
    with pytest.raises(KafkaStorageError):
        manager.create("t", 0, LogConfig())


def _failing_open(monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    from rillet.storage.log import PartitionLog

    def refuse(*_a, **_k):
        raise OSError(err, "refused")
    monkeypatch.setattr(PartitionLog, "open", staticmethod(refuse))


def test_a_disk_fault_while_creating_keeps_the_partition_off_other_dirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    from rillet.protocol.errors import KafkaStorageError
    from rillet.storage.log import PartitionLog
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    manager.load_logs(lambda t, p: LogConfig())
    real_open = PartitionLog.open
    _failing_open(monkeypatch, errno.EIO)
    with pytest.raises(KafkaStorageError):
        manager.create("t", 0, LogConfig())
    failed = manager.offline_dir_of("t", 0)
    assert failed is not None and manager.failures.is_offline(failed)
    monkeypatch.setattr(PartitionLog, "open", real_open)
    with pytest.raises(KafkaStorageError):     # its half-made directory is on that disk
        manager.create("t", 0, LogConfig())
    assert manager.create("t", 1, LogConfig()).directory.parent != failed


def test_running_out_of_descriptors_is_no_disk_fault(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    from rillet.protocol.errors import KafkaStorageError
    from rillet.storage.log import PartitionLog
    manager = LogManager([tmp_path / "a"])
    manager.load_logs(lambda t, p: LogConfig())
    real_open = PartitionLog.open
    _failing_open(monkeypatch, errno.EMFILE)
    with pytest.raises(KafkaStorageError):
        manager.create("t", 0, LogConfig())
    assert not manager.failures.offline and manager.offline_dir_of("t", 0) is None
    monkeypatch.setattr(PartitionLog, "open", real_open)
    assert manager.create("t", 0, LogConfig()) is manager.get("t", 0)   # later it works


def test_a_listener_subscribing_late_hears_of_earlier_failures(tmp_path: Path) -> None:
    """A dir that failed while the broker started must still reach the controller's
    listener, which subscribes only once the broker joins the cluster."""
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    manager.load_logs(lambda t, p: LogConfig())
    manager.create("t", 0, LogConfig())
    manager.fail_dir(tmp_path / "a", OSError(5, "Input/output error"))
    heard: list = []
    manager.failures.subscribe(heard.append)
    assert [f.log_dir for f in heard] == [tmp_path / "a"]


def test_the_broker_halts_once_every_log_dir_failed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka halts a broker whose every log dir failed; one failed dir of two does not."""
    from rillet.storage.log_dir_failure import halt_when_all_offline
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    manager.load_logs(lambda t, p: LogConfig())
    halts: list[bool] = []
    manager.failures.subscribe(halt_when_all_offline(dirs, manager.failures,
                                                     lambda: halts.append(True)))
    manager.fail_dir(dirs[0], OSError(5, "Input/output error"))
    assert halts == []
    manager.fail_dir(dirs[1], OSError(5, "Input/output error"))
    assert halts == [True]
    assert f"Shutdown broker because all log dirs in {dirs[0]},{dirs[1]} have failed" \
        in caplog.text


def _hw_file(plog: object) -> str | None:
    path = plog.directory / "high-watermark"   # type: ignore[attr-defined]
    return path.read_text().strip() if path.exists() else None


def test_every_move_of_a_log_reaches_the_listeners_once(tmp_path: Path) -> None:
    """Log end, high watermark, log start: each move is told, a non-move is not."""
    manager = LogManager([tmp_path])
    manager.load_logs(lambda t, p: LogConfig())
    heard: list[tuple[str, int]] = []
    manager.on_moved(heard.append)
    plog = manager.create("t", 0, LogConfig())
    other = manager.create("t", 1, LogConfig())
    data = bytearray(make_batch(4))
    plog.append(data, parse_batches(data), leader_epoch=0)
    assert heard == [("t", 0)]
    plog.high_watermark = 2
    plog.high_watermark = 2   # unchanged: no news
    assert heard == [("t", 0)] * 2
    plog.advance_log_start(1)
    plog.truncate_to(3)
    plog.truncate_to(9)       # past the end: nothing moves
    assert heard == [("t", 0)] * 4
    append(other, make_batch(1))
    assert heard[4:] == [("t", 1), ("t", 1)]   # the append, then its high watermark
    asyncio.run(manager.close())


def test_hw_checkpoints_write_only_the_logs_that_moved(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([tmp_path])
        manager.load_logs(lambda t, p: LogConfig())
        logs = [manager.create("t", p, LogConfig()) for p in range(3)]
        for plog in logs:
            append(plog, make_batch(2))
        assert await manager.checkpoint_high_watermarks() == 3
        assert [_hw_file(p) for p in logs] == ["2", "2", "2"]
        assert await manager.checkpoint_high_watermarks() == 0   # nothing moved since
        append(logs[1], make_batch(3))
        data = bytearray(make_batch(1))
        logs[2].append(data, parse_batches(data), leader_epoch=0)   # log end only, HW stays
        assert await manager.checkpoint_high_watermarks() == 1
        assert [_hw_file(p) for p in logs] == ["2", "5", "2"]
        await manager.close()
        # A clean stop writes every one that was still behind.
        assert [_hw_file(p) for p in logs] == ["2", "5", "2"]

    asyncio.run(scenario())


def test_run_writes_hw_checkpoints_at_their_interval(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        manager = LogManager([tmp_path], clock=clock)
        manager.load_logs(lambda t, p: LogConfig())
        plog = manager.create("t", 0, LogConfig())
        append(plog, make_batch(2))
        stop = asyncio.Event()
        runner = asyncio.create_task(manager.run(stop, hw_checkpoint_interval_ms=5000,
                                                 flush_check_interval_ms=10))
        for _ in range(20):   # 4.9 s of the clock in small steps: not due yet
            clock.advance_ms(245)
            await asyncio.sleep(0.01)
        assert _hw_file(plog) is None
        for _ in range(500):
            clock.advance_ms(100)
            await asyncio.sleep(0.01)
            if _hw_file(plog) is not None:
                break
        assert _hw_file(plog) == "2"
        stop.set()
        await asyncio.wait_for(runner, 5)
        await manager.close()

    asyncio.run(scenario())


def test_a_replica_is_made_in_its_assigned_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ids = {a: uuid.UUID(int=10), b: uuid.UUID(int=11)}
    manager = LogManager([a, b])
    manager.load_logs(lambda t, p: LogConfig(), ids, {})
    made = manager.create("t", 0, LogConfig(), ids[b])
    assert made.directory.parent == b and manager.directory_id(("t", 0)) == ids[b]
    assert manager.create("t", 1, LogConfig()).directory.parent == a   # unassigned: emptiest
    # Assigned to a dir this broker no longer has, every dir online: that dir is gone for
    # good (a replaced disk), so the replica is made anew, as in Kafka.
    gone = uuid.UUID(int=12)
    assert manager.create("t", 2, LogConfig(), gone).directory.parent == a   # a tie: first
    assert manager.create("t", 3, LogConfig(), LOST).directory.parent == b


def test_a_dir_failed_at_start_is_offline_and_keeps_its_replicas(tmp_path: Path) -> None:
    """While a dir is offline, a replica assigned to a dir not online here may have its
    data there: it is never made elsewhere (LOST or an id the broker cannot see)."""
    a, b = tmp_path / "a", tmp_path / "b"
    ids = {a: uuid.UUID(int=10), b: uuid.UUID(int=11)}
    manager = LogManager([a, b])
    manager.load_logs(lambda t, p: LogConfig(), {a: ids[a]}, {b: "cannot read it"})
    assert manager.failures.offline == {b: "cannot read it"}
    for p, assigned in enumerate((ids[b], LOST, uuid.UUID(int=12))):
        with pytest.raises(KafkaStorageError):
            manager.create("t", p, LogConfig(), assigned)
        assert manager.offline_dir_of("t", p) == assigned   # the dir could not say its id
        assert manager.get("t", p) is None and not (a / f"t-{p}").exists()
    assert manager.create("t", 5, LogConfig()).directory.parent == a   # a new replica


def test_a_new_replica_while_a_dir_is_offline_goes_to_an_online_dir(tmp_path: Path) -> None:
    """A replica dropped while its dir was offline (its topic deleted, or moved off this
    broker) is no longer offline here: a new replica of the same name, unassigned, is made
    in an online dir; one still hosted stays offline."""
    bad, good = tmp_path / "bad", tmp_path / "good"
    ids = {bad: uuid.UUID(int=10), good: uuid.UUID(int=11)}
    manager = LogManager([bad, good])
    manager.load_logs(lambda t, p: LogConfig(), ids, {})
    for topic in ("recreated", "moved", "kept"):
        assert manager.create(topic, 0, LogConfig(), ids[bad]).directory.parent == bad
    manager.fail_dir(bad, OSError(5, "Input/output error"))

    manager.delete_topic("recreated")          # deleted while its dir is offline
    manager.delete_partition("moved", 0)       # moved off this broker meanwhile
    for topic in ("recreated", "moved"):
        assert manager.offline_dir_of(topic, 0) is None
        made = manager.create(topic, 0, LogConfig())
        assert made.directory.parent == good and manager.directory_id((topic, 0)) == ids[good]
    assert manager.create("fresh", 0, LogConfig()).directory.parent == good
    # Still hosted: its data is on the offline dir, so it is never made elsewhere.
    assert manager.offline_dir_of("kept", 0) == bad
    for assigned in (uuid.UUID(int=0), ids[bad]):
        with pytest.raises(KafkaStorageError):
            manager.create("kept", 0, LogConfig(), assigned)
    assert not (good / "kept-0").exists()


def test_flush_ms_looks_only_at_logs_with_unflushed_data(tmp_path: Path) -> None:
    """An idle broker's flush.ms check visits no log: only a write puts its log in the
    queue, at the time its flush.ms elapses; a flush (or a new flush.ms) moves it."""
    clock = FakeClock()

    async def scenario() -> None:
        manager = LogManager([tmp_path], clock=clock)
        manager.load_logs(lambda t, p: LogConfig())
        logs = [manager.create("t", p, LogConfig(flush_ms=50)) for p in range(20)]
        for plog in logs:
            await plog.flush()
        await manager._flush_due(manager._now_ms())
        assert len(manager._flush_checks) == 0, "nothing unflushed: nothing to look at"
        append(logs[3], make_batch(2))
        append(logs[3], make_batch(2))
        assert manager._flush_checks.deadline(("t", 3)) == manager._now_ms() + 50
        clock.advance_ms(49)
        await manager._flush_due(manager._now_ms())
        assert logs[3].recovery_point == 0, "flush.ms not elapsed yet"
        clock.advance_ms(1)
        await manager._flush_due(manager._now_ms())
        assert logs[3].recovery_point == 4 and len(manager._flush_checks) == 0
        # Written and flushed by someone else (a roll, flush.messages): dropped at its time.
        append(logs[5], make_batch(1))
        await logs[5].flush()
        clock.advance_ms(60)
        await manager._flush_due(manager._now_ms())
        assert len(manager._flush_checks) == 0
        # flush.ms lowered on a dirty log (dynamic topic config): it counts at once.
        logs[7].update_config(LogConfig(flush_ms=10**9))
        append(logs[7], make_batch(1))
        clock.advance_ms(100)
        await manager._flush_due(manager._now_ms())
        assert logs[7].recovery_point == 0
        logs[7].update_config(LogConfig(flush_ms=50))
        await manager._flush_due(manager._now_ms())
        assert logs[7].recovery_point == 1
        await manager.close()

    asyncio.run(scenario())
