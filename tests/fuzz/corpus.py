"""The fuzz corpus: request frames recorded from real clients, as they crossed the wire.

One file per source and listener, `corpus/<source>-<listener>.frames` (listener `client` or
`controller`), each the concatenation of the frames that source sent, every one with its
int32 size prefix, exactly as recorded. `tests/fuzz/capture.py` writes them.
"""
from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
LISTENERS = ("client", "controller")
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


def split_frames(data: bytes) -> list[bytes]:
    """Size-prefixed frames from a recorded byte stream; a torn tail is dropped."""
    frames = []
    pos = 0
    while pos + 4 <= len(data):
        (size,) = _SIZE.unpack_from(data, pos)
        if size < 8 or pos + 4 + size > len(data):
            break
        frames.append(data[pos:pos + 4 + size])
        pos += 4 + size
    return frames


def write(source: str, listener: str, frames: list[bytes]) -> Path:
    assert listener in LISTENERS, listener
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    path = CORPUS_DIR / f"{source}-{listener}.frames"
    path.write_bytes(b"".join(frames))
    return path


def load(listener: str) -> dict[str, list[bytes]]:
    """Every source's frames for ``listener``: {source: [size-prefixed frame, ...]}."""
    assert listener in LISTENERS, listener
    return {path.name[:-len(f"-{listener}.frames")]: split_frames(path.read_bytes())
            for path in sorted(CORPUS_DIR.glob(f"*-{listener}.frames"))}


def api_of(frame: bytes) -> tuple[int, int]:
    """(api key, version) of a size-prefixed request frame."""
    return _KEY_VERSION.unpack_from(frame, 4)


def coverage(frames: list[bytes]) -> Counter[tuple[int, int]]:
    return Counter(api_of(f) for f in frames)
