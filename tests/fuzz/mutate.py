"""Mutations of recorded request frames: what a hostile or broken client could send.

Pure and seeded, so a campaign's frames can be regenerated from its seed. Most mutations keep
the size prefix true to the mutated body (so the broker reads the whole frame and the codec
meets the damage); some leave it stale, so framing meets it instead.
"""
from __future__ import annotations

import random
import struct
from typing import Callable

_SIZE = struct.Struct(">i")

# Values that sit on boundaries of Kafka's length encodings: the largest compact (varint)
# and legacy (int16/int32) lengths, -1 (null), -2 and zero.
INTERESTING = (
    b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\xfd\xd6\xa7\x83\x64",
    b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe",
    b"\x7f\xff", b"\xff\xff", b"\x80\x00", b"\x00\x00\x00\x00", b"\x00", b"\xff", b"\x7f",
    b"\x80", b"\x01", b"\x00\x00\x10\x00",
)


def body(frame: bytes) -> bytearray:
    return bytearray(frame[4:])


def framed(data: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(data)) + bytes(data)


def _flip_bits(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
    return data


def _random_bytes(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return data


def _interesting(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    value = rng.choice(INTERESTING)
    pos = rng.randrange(len(data))
    data[pos:pos + len(value)] = value
    return data


def _insert(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    pos = rng.randrange(len(data) + 1)
    data[pos:pos] = rng.randbytes(rng.randint(1, 16))
    return data


def _delete(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    pos = rng.randrange(len(data))
    del data[pos:pos + rng.randint(1, 16)]
    return data


def _duplicate(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    pos = rng.randrange(len(data))
    piece = data[pos:pos + rng.randint(1, 32)]
    data[pos:pos] = piece * rng.randint(1, 8)
    return data


def _truncate(rng: random.Random, data: bytearray, _: list[bytes]) -> bytearray:
    return data[:rng.randrange(len(data) + 1)]


def _splice(rng: random.Random, data: bytearray, others: list[bytes]) -> bytearray:
    """The head of this frame and the tail of another: fields of one request in another."""
    other = body(rng.choice(others))
    cut = rng.randrange(len(data) + 1)
    return data[:cut] + other[rng.randrange(len(other) + 1):]


_MUTATIONS: tuple[Callable[[random.Random, bytearray, list[bytes]], bytearray], ...] = (
    _flip_bits, _random_bytes, _interesting, _interesting, _interesting, _insert, _delete,
    _duplicate, _truncate, _splice,
)


def mutate(rng: random.Random, frame: bytes, others: list[bytes]) -> bytes:
    """A damaged copy of the size-prefixed ``frame``; the header's api key and version are
    mostly kept, so the damage reaches the body decoder of every API."""
    data = body(frame)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not data:
            break
        data = rng.choice(_MUTATIONS)(rng, data, others)
    if len(data) >= 4 and rng.random() < 0.7:
        data[0:4] = frame[4:8]  # keep api key and version
    if rng.random() < 0.1:  # a stale size prefix: the broker waits for, or misreads, bytes
        return frame[:4] + bytes(data)
    return framed(data)
