"""The fuzz corpus: request frames recorded from real clients, as they crossed the wire.

One file per source and listener, `corpus/<source>-<listener>.frames` (listener `client` or
`controller`), each the concatenation of the frames that source sent, every one with its
int32 size prefix, exactly as recorded. `tests/fuzz/capture/` writes them.

`pools` adds, for every API version a listener serves that no recording holds (no client sends
it, or not at that version), one frame rillet's codec encodes from a sample of its schema, so a
campaign reaches the decoder of every API and version served.
"""
from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

from rillet.apis import load_all
from rillet.protocol.build import build
from rillet.protocol.codec import encode_request, request_schema
from tests.samples import sample

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


def served(listener: str) -> list[tuple[int, int]]:
    """Every (api key, version) a ``listener`` decodes: client listeners serve the broker
    APIs, controller listeners those and the controller ones."""
    scope = "controller" if listener == "controller" else "broker"
    return [(s.key, v) for s in sorted(load_all().values(), key=lambda s: s.key)
            if s.served_on(scope) for v in range(s.min_version, s.max_version + 1)]


def synthesized(pairs: list[tuple[int, int]]) -> list[bytes]:
    """A frame per (api key, version), encoded by rillet from a sample of the schema (kio has
    none for Produce v0-2: those get a hand-built one-partition request)."""
    out = []
    for key, version in pairs:
        if key == 0 and version < 3:
            out.append(_produce_v0_2(version))
            continue
        cls = request_schema(key, version)
        out.append(encode_request(key, version, 1, "rillet-fuzz",
                                  build(cls, sample(cls, tagged=True, items=2))))
    return out


def _produce_v0_2(version: int) -> bytes:
    body = (struct.pack(">hhih", 0, version, 1, 4) + b"fuzz" + struct.pack(">hii", 1, 1000, 1)
            + struct.pack(">h", 6) + b"events" + struct.pack(">iii", 1, 0, 0))
    return _SIZE.pack(len(body)) + body


def pools() -> dict[str, list[bytes]]:
    """{listener: frames}: every recording for that listener, plus a synthesized frame for
    each served API version no recording holds."""
    out = {}
    for listener in LISTENERS:
        recorded = [f for frames in load(listener).values() for f in frames]
        seen = coverage(recorded)
        out[listener] = recorded + synthesized([p for p in served(listener) if p not in seen])
    return out
