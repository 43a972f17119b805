"""Log dirs at start: locked against a second process, formatted (meta.properties) on first
start and checked on every other.

Each log dir's meta.properties also holds its `directory.id` (KIP-858; metadata/
directories.py), written at format time, or added on the first start of a dir formatted
before rillet had them. A log dir that fails to lock, read or format with an I/O error is
offline from the start, as in Kafka (the broker serves its other dirs, and halts when none is
left); its id stays unknown, so its replicas are never made again elsewhere.
"""
from __future__ import annotations

import errno
import fcntl
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .defs.broker_config import read_properties
from .defs.cluster_id import new_cluster_id
from .defs.config_error import ConfigError
from .metadata.directories import RESERVED, new_directory_id
from .startup import StartupError
from .storage.durable_file import write_durably

META_FILE = "meta.properties"
LOCK_FILE = ".lock"


class DirLocks:
    """Exclusive locks on directories, one ``flock`` on ``<dir>/.lock`` each (Kafka's .lock).

    flock, not a pid file: the kernel drops the lock with the last descriptor, so a process
    that dies, even by kill -9, leaves nothing stale. The descriptors are not inherited by
    child processes. Owned by the broker, released by ``release`` at stop.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []
        # Dirs of `may_fail` that could not be locked for an I/O error: offline log dirs.
        self.failed: dict[Path, str] = {}

    @classmethod
    def acquire(cls, dirs: Iterable[Path], may_fail: Iterable[Path] = ()) -> "DirLocks":
        """Lock every dir (created if missing), or raise StartupError naming the one in use;
        a dir of `may_fail` (the log dirs) that cannot be used goes to `failed` instead."""
        locks = cls()
        optional = {Path(d).resolve(): Path(d) for d in may_fail}
        try:
            # Once per real dir: a second flock of our own would refuse us.
            for directory in dict.fromkeys(Path(d).resolve() for d in dirs):
                try:
                    locks._lock(directory)
                except _Unusable as exc:
                    if directory not in optional:
                        raise StartupError(str(exc)) from None
                    locks.failed[optional[directory]] = str(exc)
        except BaseException:
            locks.release()
            raise
        return locks

    def _lock(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _Unusable(f"cannot use directory {directory}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _lock_holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise StartupError(f"cannot lock {directory / LOCK_FILE}: {exc.strerror}") \
                    from None
            raise StartupError(f"directory {directory} is in use by another process "
                               f"({holder} holds {directory / LOCK_FILE}); two brokers must "
                               f"not share a log dir or metadata dir") from None
        self._fds.append(fd)
        try:
            # Only a hint for the next one refused: the lock itself is what counts.
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            raise _Unusable(f"cannot write {directory / LOCK_FILE}: {exc.strerror}") from None

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def _lock_holder(fd: int) -> str:
    pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"pid {pid}" if pid.isdigit() else "it"


class _Unusable(Exception):
    """A dir that cannot be locked for an I/O error (not because another process holds it)."""


@dataclass
class FormattedDirs:
    """The log dirs after formatting: the cluster id, each usable dir's directory id, and
    the dirs that failed (offline from the start) with why."""
    cluster_id: str
    directory_ids: dict[Path, uuid.UUID] = field(default_factory=dict)
    failed: dict[Path, str] = field(default_factory=dict)


def ensure_formatted(log_dirs: list[Path], node_id: int, cluster_id: str | None,
                     require_id: bool = False, failed: dict[Path, str] | None = None
                     ) -> FormattedDirs:
    """The cluster id and directory ids of these dirs; formats unformatted dirs; refuses
    mismatches. `failed`: dirs known unusable already (left alone, and reported back with
    those whose meta.properties cannot be read or written).

    require_id: a node of a multi-node quorum never invents an id, or each node
    would format itself into a cluster of its own.
    """
    failed = dict(failed or {})
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        if d in failed:
            continue
        meta = d / META_FILE
        try:
            if meta.exists():
                found[d] = read_properties(meta)
        except OSError as exc:
            failed[d] = f"cannot read {meta}: {exc.strerror}"
    ids = {props.get("cluster.id") for props in found.values()}
    if len(ids) > 1:
        raise ConfigError(f"log dirs belong to different clusters: {sorted(map(str, ids))}")
    for d, props in found.items():
        if props.get("node.id") != str(node_id):
            raise ConfigError(
                f"{d / META_FILE} was formatted for node.id {props.get('node.id')}, "
                f"this node is {node_id}")
    existing = next(iter(ids), None) if ids else None
    if existing and cluster_id and existing != cluster_id:
        raise ConfigError(f"log dirs hold cluster {existing}, config cluster.id is {cluster_id}")
    if require_id and not existing and not cluster_id:
        raise ConfigError("cluster.id must be set to format the storage of a node of a "
                          "multi-node quorum (the same id on every node; e.g. "
                          f"{new_cluster_id()})")
    chosen = existing or cluster_id or new_cluster_id()
    out = FormattedDirs(chosen, failed=failed)
    for d in log_dirs:
        if d in failed:
            continue
        props = found.get(d, {"version": "1", "cluster.id": chosen, "node.id": str(node_id)})
        try:
            out.directory_ids[d] = _directory_id(d, props)
        except OSError as exc:
            failed[d] = f"cannot write {d / META_FILE}: {exc.strerror}"
    return out


def _directory_id(log_dir: Path, props: dict[str, str]) -> uuid.UUID:
    """The dir's id from its properties; a new one written first when it has none."""
    try:
        found = uuid.UUID(props.get("directory.id", ""))
    except ValueError:
        found = None
    if found is not None and found not in RESERVED:
        return found
    props = {**props, "directory.id": str(new_directory_id())}
    log_dir.mkdir(parents=True, exist_ok=True)
    write_durably(log_dir / META_FILE,
                  "".join(f"{k}={v}\n" for k, v in props.items()).encode())
    return uuid.UUID(props["directory.id"])
