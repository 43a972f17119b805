"""Decompression bombs: small batches that claim huge sizes, built by hand (tests only)."""
from __future__ import annotations

import struct

_ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
_RLE_BLOCK = 128 << 10  # zstd's largest block


def zstd_rle_bomb(size: int) -> bytes:
    """A zstd frame of ``size`` zero bytes made of run-length blocks: 4 bytes per 128 KB, and
    no content size in its header, so a reader learns the size only by decompressing."""
    out = bytearray(_ZSTD_MAGIC + bytes([0x00, 0x38]))  # no FCS; window 2^17
    blocks = -(-size // _RLE_BLOCK)
    for i in range(blocks):
        length = min(_RLE_BLOCK, size - i * _RLE_BLOCK)
        last = 1 if i == blocks - 1 else 0
        out += (last | 1 << 1 | length << 3).to_bytes(3, "little") + b"\x00"  # type 1: RLE
    return bytes(out)
