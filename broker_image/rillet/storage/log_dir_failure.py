"""LogDirFailureChannel: which log dirs are offline, why, and who is told (Kafka's name).

A write or fsync that fails with an I/O error (EIO, ENOSPC on fsync, a yanked disk) takes
its whole log dir offline, as in Kafka: nothing in it is trusted for writing again until the
broker restarts on a repaired disk. The LogManager marks the dir here and closes its logs;
subscribers (the replica manager, which drops the roles and tells the controller) hear of
each dir once. DescribeLogDirs and the `rillet_offline_log_dirs` gauge read `offline`.
When every log dir has failed, the broker halts (halt_when_all_offline), as Kafka's
ReplicaManager does: a broker with nowhere to keep a replica only holds on to leaderships
and registrations the cluster should move elsewhere.

Not thread-safe: used from the event loop thread only (failures found in worker threads
come back to it as exceptions first).
"""
from __future__ import annotations

import errno
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LogDirFailure:
    """One log dir gone offline, and the partitions whose logs it held."""
    log_dir: Path
    reason: str
    partitions: tuple[TopicPartition, ...]


FailureListener = Callable[[LogDirFailure], None]

# Limits of the process, not faults of a disk: opening a file can fail with these while the
# disk is fine (e.g. zero-copy Fetch responses holding descriptors); such a failure is the
# one call's, and must not take a healthy log dir offline until a restart.
_PROCESS_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def is_disk_fault(exc: BaseException) -> bool:
    """Whether an error opening or creating files means the disk failed."""
    return not (isinstance(exc, OSError) and exc.errno in _PROCESS_LIMITS)


class LogDirFailureChannel:
    """Owner of the offline-dir set (see the module doc)."""

    def __init__(self) -> None:
        self.offline: dict[Path, str] = {}   # log dir -> why it went offline
        self._listeners: list[FailureListener] = []
        self._failures: list[LogDirFailure] = []

    def subscribe(self, listener: FailureListener) -> None:
        """Tell `listener` of every later failure, and of those already seen: a dir that
        failed while the broker started (loading, catching up) must still reach a listener
        that subscribes later, such as the one telling the controller."""
        self._listeners.append(listener)
        for failure in self._failures:
            self._tell(listener, failure)

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self.offline

    def report(self, failure: LogDirFailure) -> None:
        """Record `failure` (the first report of a dir only) and tell every subscriber."""
        if failure.log_dir in self.offline:
            return
        self.offline[failure.log_dir] = failure.reason
        self._failures.append(failure)
        log.error("log dir %s is offline (%s): %d partitions with it", failure.log_dir,
                  failure.reason, len(failure.partitions))
        for listener in self._listeners:
            self._tell(listener, failure)

    @staticmethod
    def _tell(listener: FailureListener, failure: LogDirFailure) -> None:
        try:
            listener(failure)
        except Exception:
            log.exception("a log dir failure listener failed")


def halt() -> None:
    """End the process at once with exit code 1 (Kafka's Exit.halt(1)): no controlled
    shutdown, which would write to the failed disks and wait on the cluster."""
    logging.shutdown()   # the reason must reach the log before the process is gone
    sys.stderr.flush()
    os._exit(1)


def halt_when_all_offline(log_dirs: Sequence[Path], channel: LogDirFailureChannel,
                          halt: Callable[[], None] = halt) -> FailureListener:
    """A listener that halts the broker once every one of `log_dirs` is offline."""
    def on_failure(_: LogDirFailure) -> None:
        if all(channel.is_offline(Path(d)) for d in log_dirs):
            log.critical("Shutdown broker because all log dirs in %s have failed",
                         ",".join(map(str, log_dirs)))
            halt()
    return on_failure
