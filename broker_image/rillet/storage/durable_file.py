"""Small files replaced whole and durably (quorum state, snapshots, meta.properties).

Write a temporary file, fsync it, rename it over the old one and fsync the directory:
after a crash the file holds the old content or the new, never a mix, and a completed
write survives power loss. Blocking: callers on the event loop use a worker thread.
"""
from __future__ import annotations

import os
from pathlib import Path


def write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
