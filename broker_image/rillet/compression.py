"""Record batch compression codecs (attributes & 7): gzip, snappy, lz4, zstd, via cramjam.

Decompression is bounded. A batch is small on the wire but may claim any size decompressed: a
98 KB zstd batch of zeros is 3 GB, and cramjam, like kio, aborts the whole process when an
allocation fails (a Rust allocation failure, no Python exception), or the pod is killed for
memory. A client can produce such a batch to any topic, and the broker decompresses client
batches to answer ListOffsets by timestamp and to compact. So every batch is decompressed into
a buffer of at most MAX_DECOMPRESSED_BYTES (an anonymous mapping: only the pages written take
memory), and one that does not fit is a CorruptMessage, never an allocation.
"""
from __future__ import annotations

import mmap
import struct
from enum import IntEnum

import cramjam

from rillet.protocol.errors import CorruptMessage

# Far above any batch a producer builds (Kafka's batch.size defaults to 16 KB, librdkafka's
# to 1 MB, and message.max.bytes bounds the compressed size at 1 MB), far below a pod's memory.
MAX_DECOMPRESSED_BYTES = 128 << 20

_INT32 = struct.Struct(">i")


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Java clients (xerial snappy-java SnappyOutputStream) frame snappy like this;
# librdkafka writes a raw snappy block. We read both and write the framed form.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptMessage(f"unknown compression codec {codec}")


# Codecs whose cramjam decompress_into refuses output past the buffer (snappy has its own path).
_BOUNDED_CODECS = {Compression.GZIP: cramjam.gzip, Compression.LZ4: cramjam.lz4,
                   Compression.ZSTD: cramjam.zstd}


def decompress(codec: int, data: bytes, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """``data`` decompressed; CorruptMessage when it is not valid for ``codec`` or would take
    more than ``limit`` bytes."""
    if codec == Compression.NONE:
        return data
    module = _BOUNDED_CODECS.get(codec)
    try:
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, limit)
        if module is not None:
            return _bounded(module.decompress_into, data, limit)
    except CorruptMessage:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CorruptMessage(f"cannot decompress {Compression(codec).name} batch of "
                             f"{len(data)} bytes within {limit} bytes: {exc}") from exc
    raise CorruptMessage(f"unknown compression codec {codec}")


def _bounded(decompress_into: object, data: bytes, limit: int) -> bytes:
    """cramjam's decompress_into refuses output past the buffer's end instead of growing it."""
    buf = mmap.mmap(-1, max(limit, 1))
    try:
        written = decompress_into(data, buf)  # type: ignore[operator]
        return buf[:written]
    finally:
        buf.close()


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    """A raw block states its decompressed length up front: checked before decompressing."""
    if not data.startswith(XERIAL_MAGIC):
        _check_snappy_length(data, 0, limit)
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptMessage("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptMessage("truncated xerial snappy block")
        block = data[pos:pos + length]
        _check_snappy_length(block, len(out), limit)
        out += cramjam.snappy.decompress_raw(block)
        pos += length
    return bytes(out)


def _check_snappy_length(block: bytes, used: int, limit: int) -> None:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if used + claimed > limit:
        raise CorruptMessage(f"snappy block of {len(block)} bytes claims {claimed} bytes, "
                             f"past the batch's limit of {limit} ({used} used)")


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: bytes) -> bytes:
    # Kafka's LZ4 reader (KafkaLZ4BlockInputStream) needs independent blocks.
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish())
