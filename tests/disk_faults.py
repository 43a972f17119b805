"""A full disk for one broker process: its log dir on a small tmpfs mounted inside a private
mount namespace of its own (`unshare -m`), so nothing is mounted on the machine itself and
the mount ends with the process. Needs root (or user namespaces with mount rights).

    broker.prefix = small_disk(broker.data_dir, 8 << 20)   # before the broker starts

The tmpfs, and so every record on it, is gone once the process exits: a restart starts
from an empty log dir, like a replaced disk. Keep the metadata log elsewhere
(metadata.log.dir) to fill only the partitions' dir.
"""
from __future__ import annotations

import shutil
from pathlib import Path

# Mount the tmpfs over the log dir, then become the broker (same pid, so signals reach it).
_SCRIPT = 'mount -t tmpfs -o "size=$1,mode=0755" rillet-full-disk "$2" && shift 2 && exec "$@"'


def can_make_small_disks() -> bool:
    return shutil.which("unshare") is not None and shutil.which("mount") is not None


def small_disk(directory: Path, size_bytes: int) -> list[str]:
    """The command prefix that runs a process with `directory` on a tmpfs of `size_bytes`."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT,
            "small-disk", str(size_bytes), str(directory)]
