"""LogManager: every PartitionLog of this broker, across its log.dirs; retention and flush.ms.

Partition directories are ``<log.dir>/<topic>-<partition>`` (topics may contain
'-', so the partition is what follows the last one). The metadata log
(``__cluster_metadata-0``) shares the directory layout but is owned by the
controller, so it is skipped here. A deleted topic's directories are renamed to
``<topic>-<partition>.<hex>-delete`` at once (atomic, cheap) and removed in a
worker thread; leftovers from a crash are removed by ``load_logs``.

A failed write or fsync takes its whole log dir offline (log_dir_failure.py, as Kafka's
LogDirFailureChannel): its logs leave this manager at once (their partitions are then
"offline" here: `get` finds none, `create` refuses them), their files are closed once the
failing call has unwound, and the failure channel tells its subscribers. Other dirs go on.
A dir that cannot be read at start-up is offline from the start.

Every move of a log's end, high watermark or log start reaches this manager (the log's
``on_moved``): it keeps the partitions whose high watermark may differ from their checkpoint
and passes the move on to its listeners (the replica manager). ``run`` writes the
``high-watermark`` files of those partitions only, every
``replica.high.watermark.checkpoint.interval.ms`` as Kafka does (not on every change, and
never by walking every log); closing a log writes its own, so a clean stop leaves every one
current, and after a kill -9 a restart starts at most that interval behind (a lower high
watermark is safe: it only ever rises again from the leader).

flush.ms is checked only for the logs with something to flush, each when its flush.ms
can have elapsed (a DeadlineQueue): a write schedules its log, a new config reschedules it,
so an idle broker's flush check costs nothing per log.

Each log dir has a directory id (storage_format.py); a replica's log is made in the dir its
metadata assigns it (metadata/directories.py), or in the least loaded one when none is
assigned yet. A replica whose log is missing and whose assigned dir is not online here is
offline, never made again elsewhere (empty, it would pass for the replica), as long as any
log dir of this broker is offline: its data may be there (Kafka's LogManager refuses the
same). With every dir online, the dir it was in is gone for good (a replaced or wiped disk):
it is made anew, empty, and catches up from the leader like any new replica, as in Kafka.
A replica dropped while offline (its topic deleted, or moved off this broker) is offline
no more: a replica of the same name made here later is a new one, unassigned, and goes to
an online dir (KAFKA_STORAGE_ERROR only when none is online).

Not thread-safe: owned by the broker and used only from the event loop thread.
``run`` is the one background task that applies retention, flush.ms and the HW checkpoints.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from rillet.deadlines import DeadlineQueue
from rillet.metadata.directories import UNASSIGNED
from rillet.pacing import Pacer
from rillet.protocol.errors import KafkaStorageError
from rillet.storage.log import PartitionLog
from rillet.storage.log_config import LogConfig
from rillet.storage.log_dir_failure import LogDirFailure, LogDirFailureChannel, is_disk_fault

log = logging.getLogger(__name__)

METADATA_LOG_DIR = "__cluster_metadata-0"
DELETE_SUFFIX = "-delete"
HW_CHECKPOINT_INTERVAL_MS = 5000   # Kafka's replica.high.watermark.checkpoint.interval.ms
TopicPartition = tuple[str, int]


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``"my-topic-3"`` -> ("my-topic", 3); None for anything that is not a partition dir."""
    if name == METADATA_LOG_DIR or "." in name.rsplit("-", 1)[-1]:
        return None
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    """Owner of every partition log (see the module doc for the thread-safety contract)."""

    def __init__(self, log_dirs: list[Path], *, clock: Callable[[], float] = time.time) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self._clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._per_dir = {d: 0 for d in self.log_dirs}  # partition logs in each log dir
        self._deletions: set[asyncio.Task[None]] = set()
        self.failures = LogDirFailureChannel()
        # partition -> its offline log dir (or the unknown directory id it is assigned to)
        self._offline: dict[tuple[str, int], Path | uuid.UUID] = {}
        self._ids: dict[Path, uuid.UUID] = {}   # log dir -> its directory id
        self._hw_unsaved: set[TopicPartition] = set()    # moved since their HW checkpoint
        self._moved_listeners: list[Callable[[TopicPartition], None]] = []
        # Logs with unflushed data, each at the time its flush.ms elapses.
        self._flush_checks: DeadlineQueue[TopicPartition] = DeadlineQueue()

    # ------------------------------------------------------------ loading, lookup

    def load_logs(self, config_for: Callable[[str, int], LogConfig],
                  directory_ids: Mapping[Path, uuid.UUID] | None = None,
                  failed: Mapping[Path, str] | None = None) -> None:
        """Open (and recover) every partition directory found in the log dirs; a dir that
        cannot be read goes offline (the broker serves the others), as do the dirs
        `failed` already (storage_format.py). `directory_ids`: each usable dir's id."""
        self._ids = dict(directory_ids or {})
        for log_dir, why in (failed or {}).items():
            self.fail_dir(log_dir, OSError(why))
        for log_dir in self.log_dirs:
            if self.failures.is_offline(log_dir):
                continue
            try:
                self._load_dir(log_dir, config_for)
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        log.info("loaded %d partition logs from %s", len(self._logs), ", ".join(map(str, self.log_dirs)))

    def _load_dir(self, log_dir: Path, config_for: Callable[[str, int], LogConfig]) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)  # a deletion a crash interrupted
                continue
            parsed = parse_partition_dir(child.name)
            if parsed is None:
                continue
            if parsed in self._logs:
                log.error("%s-%d exists in two log dirs; keeping %s, ignoring %s", *parsed,
                          self._logs[parsed].directory, child)
                continue
            started = time.monotonic()
            self._open(log_dir, parsed, config_for(*parsed))
            log.debug("loaded %s in %.1f ms", child, (time.monotonic() - started) * 1000)

    def _open(self, log_dir: Path, tp: tuple[str, int], config: LogConfig) -> PartitionLog:
        plog = PartitionLog.open(log_dir / f"{tp[0]}-{tp[1]}", config, clock=self._clock)
        self._per_dir[log_dir] += 1
        return self._register(log_dir, tp, plog)

    def _register(self, log_dir: Path, tp: tuple[str, int], plog: PartitionLog) -> PartitionLog:
        """`plog` (counted in `log_dir` already) is served from here on."""
        plog.local.on_io_error = lambda exc: self.fail_dir(log_dir, exc)
        plog.on_moved = lambda: self._moved(tp)
        plog.on_config_changed = lambda: self._schedule_flush(tp, plog)
        self._logs[tp] = plog
        self._schedule_flush(tp, plog)   # recovered above its recovery point, maybe
        return plog

    def _schedule_flush(self, tp: TopicPartition, plog: PartitionLog) -> None:
        self._flush_checks.schedule(tp, plog.flush_due_at())

    def on_moved(self, listener: Callable[[TopicPartition], None]) -> None:
        """Call `listener(tp)` after every move of a log's end, high watermark or log start."""
        self._moved_listeners.append(listener)

    def _moved(self, tp: TopicPartition) -> None:
        self._hw_unsaved.add(tp)
        if tp not in self._flush_checks:
            # A write makes its log dirty; while it stays so its due time only moves when
            # it is flushed or reconfigured, which reschedule it themselves.
            plog = self._logs.get(tp)
            if plog is not None:
                self._schedule_flush(tp, plog)
        for listener in self._moved_listeners:
            listener(tp)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def directory_id(self, tp: tuple[str, int]) -> uuid.UUID | None:
        """The id of the dir holding `tp`'s log (None: no log here, or a dir without id)."""
        plog = self._logs.get(tp)
        return None if plog is None else self._ids.get(plog.directory.parent)

    def create(self, topic: str, partition: int, config: LogConfig,
               assigned: uuid.UUID = UNASSIGNED) -> PartitionLog:
        """The partition's log, created if it does not exist yet: in the dir `assigned`
        (its metadata's directory id), or the least loaded one when UNASSIGNED."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        log_dir = self._dir_for_new(topic, partition, assigned)
        try:
            return self._open(log_dir, (topic, partition), config)
        except OSError as exc:
            self._creation_failed(log_dir, (topic, partition), exc)
            raise KafkaStorageError(f"{topic}-{partition}: cannot create its log in "
                                    f"{log_dir}: {exc}") from exc

    def _creation_failed(self, log_dir: Path, tp: tuple[str, int], exc: OSError) -> None:
        """A disk fault takes the dir offline with the partition being created in it (its
        half-made directory is there: never made again elsewhere); running out of
        descriptors is only this call's failure."""
        if not is_disk_fault(exc):
            log.warning("%s-%d: cannot create its log now: %s", *tp, exc)
            return
        self.fail_dir(log_dir, exc)
        self._offline[tp] = log_dir

    def _dir_for_new(self, topic: str, partition: int, assigned: uuid.UUID) -> Path:
        """The online dir `assigned`, else the least loaded online one; KAFKA_STORAGE_ERROR
        for a partition whose dir failed, or is not online here while a dir is offline
        (never made again elsewhere: its data may be there), or when no dir is online."""
        tp = (topic, partition)
        if assigned != UNASSIGNED and tp not in self._offline:
            wanted = next((d for d, i in self._ids.items() if i == assigned), None)
            if wanted is not None and not self.failures.is_offline(wanted):
                return wanted
            if wanted is not None or self.failures.offline:
                self._offline[tp] = assigned if wanted is None else wanted
        if tp in self._offline:
            raise KafkaStorageError(f"{topic}-{partition}: its log dir "
                                    f"{self._offline[tp]} is offline")
        online = [d for d in self.log_dirs if not self.failures.is_offline(d)]
        if not online:
            raise KafkaStorageError("every log dir of this broker is offline")
        return min(online, key=self._per_dir.__getitem__)

    # ------------------------------------------------------------ offline log dirs

    def directory_ids(self) -> tuple[tuple[uuid.UUID, ...], tuple[uuid.UUID, ...]]:
        """(online, offline): the directory ids of this broker's log dirs, as registration and
        heartbeats name them (KIP-858); a dir unreadable at start has no known id."""
        online = tuple(i for d, i in self._ids.items() if not self.failures.is_offline(d))
        offline = tuple(i for d, i in self._ids.items() if self.failures.is_offline(d))
        return online, offline

    def offline_dir_of(self, topic: str, partition: int) -> Path | uuid.UUID | None:
        """The offline log dir that held this partition's log, if it did (its directory id
        when that dir is not one of this broker's online dirs)."""
        return self._offline.get((topic, partition))

    def fail_dir(self, log_dir: Path, exc: BaseException) -> None:
        """Take `log_dir` offline (see the module doc); a second call for it does nothing."""
        if self.failures.is_offline(log_dir):
            return
        gone = [(tp, plog) for tp, plog in self._logs.items() if plog.directory.parent == log_dir]
        for tp, plog in gone:
            del self._logs[tp]
            self._offline[tp] = log_dir
            plog.local.failed = True     # no write may land there while it closes
        self._per_dir[log_dir] = 0
        try:
            # Closing files touches the failing disk: after the failing call unwinds.
            asyncio.get_running_loop().call_soon(self._close_failed, [p for _, p in gone])
        except RuntimeError:
            self._close_failed([p for _, p in gone])
        self.failures.report(LogDirFailure(log_dir, str(exc), tuple(tp for tp, _ in gone)))

    @staticmethod
    def _close_failed(plogs: list[PartitionLog]) -> None:
        for plog in plogs:
            try:
                plog.local.close()
            except OSError as exc:
                log.warning("%s: closing on a failed disk: %s", plog.directory, exc)

    async def create_off_loop(self, topic: str, partition: int, config: LogConfig,
                              assigned: uuid.UUID = UNASSIGNED) -> PartitionLog:
        """create(), with the directory and files made in a worker thread (a few ms of
        file system calls per log, thousands of logs after a large CreateTopics); the log
        is registered here, on the event loop. The caller must not create or delete the
        same partition meanwhile (replication/log_creator.py, its one caller, ensures it)."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        log_dir = self._dir_for_new(topic, partition, assigned)
        self._per_dir[log_dir] += 1   # counted now, so creations meanwhile spread over dirs
        try:
            plog = await asyncio.to_thread(PartitionLog.open, log_dir / f"{topic}-{partition}",
                                           config, clock=self._clock)
        except BaseException as exc:
            self._per_dir[log_dir] -= 1
            if isinstance(exc, OSError):
                self._creation_failed(log_dir, (topic, partition), exc)
            raise
        if self.failures.is_offline(log_dir):   # it failed while the files were made
            plog.local.close()
            self._offline[(topic, partition)] = log_dir
            raise KafkaStorageError(f"{topic}-{partition}: log dir {log_dir} went offline")
        return self._register(log_dir, (topic, partition), plog)

    def delete_topic(self, topic: str) -> None:
        """Close and remove every partition log of ``topic``; its replicas offline here are
        dropped too (a topic made again under its name is a new one: its replicas here go
        to an online dir, not offline with the old one's)."""
        for key in [k for k in (*self._logs, *self._offline) if k[0] == topic]:
            self.delete_partition(*key)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Close and remove one partition log (no-op when it is not here)."""
        self._offline.pop((topic, partition), None)   # a dropped replica is no longer offline
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.close()
        self._per_dir[plog.directory.parent] -= 1
        doomed = plog.directory.with_name(f"{plog.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        try:
            plog.directory.rename(doomed)
        except OSError:
            log.exception("could not rename %s for deletion; deleting in place", plog.directory)
            doomed = plog.directory
        self._remove_dir(doomed)

    def _remove_dir(self, path: Path) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            shutil.rmtree(path, ignore_errors=True)
            return
        task = loop.create_task(asyncio.to_thread(shutil.rmtree, path, True))
        self._deletions.add(task)
        task.add_done_callback(self._deletions.discard)

    # ------------------------------------------------------------ background work

    async def run(self, stop: asyncio.Event, *, retention_check_interval_ms: int = 300000,
                  flush_check_interval_ms: int = 1000,
                  hw_checkpoint_interval_ms: int = HW_CHECKPOINT_INTERVAL_MS) -> None:
        """Apply retention every retention_check_interval_ms, flush.ms every tick and write
        the HW checkpoints every hw_checkpoint_interval_ms, until ``stop``."""
        tick = max(0.01, min(flush_check_interval_ms, retention_check_interval_ms,
                             hw_checkpoint_interval_ms) / 1000)
        next_retention = self._now_ms() + retention_check_interval_ms
        next_checkpoint = self._now_ms() + hw_checkpoint_interval_ms
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=tick)
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                break
            now = self._now_ms()
            await self._flush_due(now)
            if now >= next_retention:
                self.apply_retention(now)
                next_retention = now + retention_check_interval_ms
            if now >= next_checkpoint:
                await self.checkpoint_high_watermarks()
                next_checkpoint = self._now_ms() + hw_checkpoint_interval_ms

    async def checkpoint_high_watermarks(self) -> int:
        """Write the high-watermark file of every log whose high watermark moved since its
        last one (Kafka's replication-offset-checkpoint); how many were written.

        Only the partitions that moved are visited. Under a producer to a few thousand
        partitions that is still thousands of small files, so it yields between slices."""
        due, self._hw_unsaved = self._hw_unsaved, set()
        pacer = Pacer(rest=1.0)
        written = 0
        for tp in due:
            await pacer.pace()
            plog = self._logs.get(tp)
            if plog is None:
                continue   # deleted, or its dir went offline, meanwhile
            try:
                written += plog.checkpoint_high_watermark()
            except OSError as exc:
                log.warning("%s-%d: cannot checkpoint the high watermark: %s", *tp, exc)
                if is_disk_fault(exc):   # not when only descriptors ran out
                    self.fail_dir(plog.directory.parent, exc)
                else:
                    self._hw_unsaved.add(tp)   # again next time
        return written

    def apply_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log (also rolls idle segments past segment.ms)."""
        now = self._now_ms() if now_ms is None else now_ms
        deleted = 0
        for key, plog in list(self._logs.items()):
            try:
                plog.maybe_roll()
                deleted += plog.apply_retention(now)
            except Exception:
                log.exception("retention of %s-%d failed", *key)
        return deleted

    async def _flush_due(self, now_ms: int) -> None:
        due: list[tuple[TopicPartition, PartitionLog]] = []
        for tp in self._flush_checks.pop_due(now_ms):
            plog = self._logs.get(tp)
            if plog is None:
                continue   # deleted, or its dir went offline
            if plog.flush_due(now_ms):
                due.append((tp, plog))
            else:   # flushed meanwhile (flush.messages, a roll), or flush.ms raised
                self._schedule_flush(tp, plog)
        if not due:
            return
        results = await asyncio.gather(*(plog.flush() for _, plog in due),
                                       return_exceptions=True)
        for (tp, plog), result in zip(due, results):
            if isinstance(result, BaseException):
                log.error("flush of %s failed: %s", plog.directory, result)
            if self._logs.get(tp) is plog:
                # Written during the fsync, or failed: due again (a failure at the next tick).
                self._schedule_flush(tp, plog)

    async def flush_all(self) -> None:
        results = await asyncio.gather(*(plog.flush() for plog in self._logs.values()),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.error("flush failed: %s", result)

    async def close(self) -> None:
        """Flush and close every log (clean shutdown: the next start recovers only active segments)."""
        await self.flush_all()
        for plog in self._logs.values():
            plog.close()
        self._logs.clear()
        if self._deletions:
            await asyncio.gather(*self._deletions, return_exceptions=True)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
