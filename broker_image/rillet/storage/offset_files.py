"""The small state files beside a partition's segments, and the fsync that makes them durable.

- ``recovery-point``: offset below which everything was fsynced (loading trusts it);
- ``high-watermark``: the last checkpointed high watermark (a restart never starts above it);
- ``log-start-offset``: where DeleteRecords moved the start inside a segment.

Each is one decimal line, written to a temporary file and renamed over the old one, so a
crash leaves the old value or the new one, never a torn one.
"""
from __future__ import annotations

import os
from pathlib import Path

RECOVERY_POINT_NAME = "recovery-point"
HIGH_WATERMARK_NAME = "high-watermark"
LOG_START_NAME = "log-start-offset"


def read_offset_file(directory: Path, name: str) -> int | None:
    """The offset in `name`, None when the file is missing or unreadable."""
    try:
        return max(0, int((directory / name).read_text().strip()))
    except (OSError, ValueError):
        return None


def write_offset_file(directory: Path, name: str, offset: int, *, sync: bool) -> None:
    path = directory / name
    tmp = directory / (name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{offset}\n".encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_recovery_point(directory: Path, offset: int, *, sync: bool) -> None:
    write_offset_file(directory, RECOVERY_POINT_NAME, offset, sync=sync)


def sync_files(directory: Path, fds: list[int], sync_dir: bool, epochs: Path | None,
               recovery_point: int | None) -> None:
    """Worker thread: fsync the dup()ed descriptors (closing them), then the small state files."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
    if epochs is not None:
        # The loop rewrites this file (tmp + rename) on leader changes; fsync whichever is current.
        try:
            fd = os.open(epochs, os.O_RDONLY)
        except FileNotFoundError:
            pass
        else:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    if recovery_point is not None:
        write_recovery_point(directory, recovery_point, sync=True)
    if sync_dir or recovery_point is not None:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
