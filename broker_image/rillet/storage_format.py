"""Log dirs at start: locked against a second process, formatted (meta.properties) on first
start and checked on every other."""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Iterable

from .defs.broker_config import read_properties
from .defs.cluster_id import new_cluster_id
from .defs.config_error import ConfigError
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

    @classmethod
    def acquire(cls, dirs: Iterable[Path]) -> "DirLocks":
        """Lock every dir (created if missing), or raise StartupError naming the one in use."""
        locks = cls()
        try:
            # Once per real dir: a second flock of our own would refuse us.
            for directory in dict.fromkeys(Path(d).resolve() for d in dirs):
                locks._lock(directory)
        except BaseException:
            locks.release()
            raise
        return locks

    def _lock(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StartupError(f"cannot use directory {directory}: {exc.strerror}") from None
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
        # Only a hint for the next one refused: the lock itself is what counts.
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fds.append(fd)

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def _lock_holder(fd: int) -> str:
    pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"pid {pid}" if pid.isdigit() else "it"


def ensure_formatted(log_dirs: list[Path], node_id: int, cluster_id: str | None,
                     require_id: bool = False) -> str:
    """The cluster id of these dirs; formats unformatted dirs; refuses mismatches.

    require_id: a node of a multi-node quorum never invents an id, or each node
    would format itself into a cluster of its own.
    """
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        meta = d / META_FILE
        if meta.exists():
            found[d] = read_properties(meta)
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
    for d in log_dirs:
        if d in found:
            continue
        d.mkdir(parents=True, exist_ok=True)
        write_durably(d / META_FILE, f"version=1\ncluster.id={chosen}\nnode.id={node_id}\n"
                      .encode())
    return chosen
