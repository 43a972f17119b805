"""RecordBatch v2 (magic 2): header parsing, CRC-32C validation, offset rewrite, codecs.

Batches travel through the broker as the bytes the client sent. The hot path
(produce -> log) only parses the fixed 61-byte header of each batch, checks the
CRC once, and patches base_offset / partition_leader_epoch in place: the CRC
covers attributes .. end of batch, so those two fields change without a new CRC.

Decoding individual records (``decode_records``) and building batches
(``encode_batch``) are for the rare paths: ListOffsets by timestamp, the
metadata log, __consumer_offsets, compaction, tests.

Layout (big endian), offsets in bytes::

    0  base_offset int64          27 base_timestamp int64
    8  batch_length int32         35 max_timestamp int64
    12 partition_leader_epoch     43 producer_id int64
    16 magic int8                 51 producer_epoch int16
    17 crc uint32 (crc32c 21..)   53 base_sequence int32
    21 attributes int16           57 records_count int32
    23 last_offset_delta int32    61 records...

Thread safety: pure functions over the buffers passed in; no shared state.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Sequence

from crc32c import crc32c

from rillet.compression import Compression, compress, decompress
from rillet.protocol.errors import CorruptMessage, InvalidRecord

BATCH_HEADER_SIZE = 61
# batch_length counts the bytes after the length field itself.
LOG_OVERHEAD = 12
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35

# The whole fixed header, in BatchHeader's field order (after ``position``).
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_OFFSET_EPOCH = struct.Struct(">qii")  # base_offset, batch_length, leader_epoch
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40   # KIP-534: the base timestamp is the delete horizon

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed header of one batch, plus where it starts in the parsed buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence arithmetic as Kafka does it: wraps from INT32_MAX back to 0."""
    if sequence < 0:
        return sequence
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def read_header(buf: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Unpack the header at ``position`` (caller checked 61 bytes are there)."""
    return BatchHeader(position, *HEADER_STRUCT.unpack_from(buf, position))


def _crc_of(buf: bytes | bytearray | memoryview, position: int, end: int) -> int:
    view = memoryview(buf)[position + CRC_START:end]
    try:
        return crc32c(view)
    finally:
        view.release()


def parse_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, strict: bool = True
) -> list[BatchHeader]:
    """Validate a produce payload: one or more whole v2 batches and nothing else.

    ``strict`` adds the checks real producers never violate but compacted or
    replicated data may (records_count >= 1, last_offset_delta == count - 1).
    Raises CorruptMessage (framing, magic, CRC) or InvalidRecord (counts).
    """
    total = len(buf)
    if total == 0:
        raise CorruptMessage("empty record set")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise CorruptMessage(f"truncated batch header at byte {pos}: {total - pos} bytes left")
        header = read_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptMessage(f"batch_length {header.batch_length} < {MIN_BATCH_LENGTH} at byte {pos}")
        end = pos + header.size
        if end > total:
            raise CorruptMessage(f"truncated batch at byte {pos}: needs {header.size}, has {total - pos}")
        if header.magic != 2:
            raise CorruptMessage(f"unsupported magic {header.magic} at byte {pos} (only v2 batches)")
        if verify_crc and _crc_of(buf, pos, end) != header.crc:
            raise CorruptMessage(f"CRC-32C mismatch in batch at byte {pos}")
        if strict:
            _check_counts(header)
        headers.append(header)
        pos = end
    return headers


def _check_counts(header: BatchHeader) -> None:
    if header.records_count < 1:
        raise InvalidRecord(f"batch at byte {header.position} has records_count {header.records_count}")
    if header.last_offset_delta != header.records_count - 1:
        raise InvalidRecord(
            f"batch at byte {header.position}: last_offset_delta {header.last_offset_delta} "
            f"!= records_count - 1 ({header.records_count - 1})"
        )


def set_offsets(buf: bytearray, header: BatchHeader, base_offset: int, leader_epoch: int) -> None:
    """Patch base_offset and partition_leader_epoch in place; the CRC does not cover them."""
    _INT64.pack_into(buf, header.position, base_offset)
    _INT32.pack_into(buf, header.position + 12, leader_epoch)


def set_log_append_time(buf: bytearray, header: BatchHeader, timestamp_ms: int) -> BatchHeader:
    """Mark the batch LogAppendTime with ``timestamp_ms`` and recompute its CRC.

    Returns the updated header (the frozen one passed in is stale afterwards).
    """
    pos = header.position
    attributes = header.attributes | ATTR_TIMESTAMP_TYPE
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    crc = _crc_of(buf, pos, pos + header.size)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return read_header(buf, pos)



def set_delete_horizon(batch: bytes | memoryview, horizon_ms: int) -> bytes:
    """A copy of one whole batch marked with a delete horizon (Kafka's attribute bit 6,
    KIP-534: the base timestamp becomes the horizon) and its CRC recomputed."""
    out = bytearray(batch)
    (attributes,) = _INT16.unpack_from(out, ATTRIBUTES_OFFSET)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, attributes | ATTR_DELETE_HORIZON)
    _INT64.pack_into(out, BASE_TIMESTAMP_OFFSET, horizon_ms)
    _UINT32.pack_into(out, CRC_OFFSET, _crc_of(out, 0, len(out)))
    return bytes(out)

# ---------------------------------------------------------------- records


@dataclass
class Record:
    """One record of a batch, decoded (the rare paths the module doc lists, never produce)."""
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint (Kafka's varint/varlong) -> (value, new position)."""
    shift = 0
    raw = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptMessage("truncated varint in record") from None
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptMessage("varint too long in record")


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptMessage("record field runs past the batch")
    return buf[pos:end], end


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _parse_record(buf: bytes, pos: int, header: BatchHeader) -> tuple[Record, int]:
    length, pos = _read_varint(buf, pos)
    end = pos + length
    if length < 0 or end > len(buf):
        raise CorruptMessage("record length runs past the batch")
    attributes = buf[pos]
    ts_delta, p = _read_varint(buf, pos + 1)
    offset_delta, p = _read_varint(buf, p)
    key, p = _read_bytes(buf, p)
    value, p = _read_bytes(buf, p)
    count, p = _read_varint(buf, p)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        hkey, p = _read_bytes(buf, p)
        hvalue, p = _read_bytes(buf, p)
        headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
    if p != end:
        raise CorruptMessage("record length does not match its fields")
    if header.timestamp_type == 1:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + ts_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers, attributes), end


def decode_records(batch: bytes | bytearray | memoryview) -> tuple[BatchHeader, list[Record]]:
    """Decode one whole batch (any codec). The header's position is 0."""
    data = bytes(batch)
    if len(data) < BATCH_HEADER_SIZE:
        raise CorruptMessage("truncated batch header")
    header = read_header(data, 0)
    if header.magic != 2:
        raise CorruptMessage(f"unsupported magic {header.magic}")
    if header.size > len(data) or header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptMessage("batch length runs past the buffer")
    body = decompress(header.compression, data[BATCH_HEADER_SIZE:header.size])
    records = []
    pos = 0
    for _ in range(header.records_count):
        record, pos = _parse_record(body, pos, header)
        records.append(record)
    return header, records


def _encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray()
    body.append(record.attributes & 0xFF)
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for hkey, hvalue in record.headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hvalue)
    _write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression | int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    is_control: bool = False,
    is_transactional: bool = False,
    timestamp_type: int = 0,
) -> bytes:
    """Build one v2 batch.

    Record offsets are absolute (delta = offset - base_offset); if any record's
    offset is below base_offset, all offsets are taken as deltas already
    (callers may number records 0..n-1). base_timestamp is the first record's
    timestamp, as the Java producer does.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    relative = min(r.offset for r in records) < base_offset
    shift = 0 if relative else base_offset
    base_ts = records[0].timestamp
    body = bytearray()
    for record in records:
        _encode_record(body, record, record.offset - shift, record.timestamp - base_ts)
    last_delta = max(r.offset for r in records) - shift
    max_ts = max(r.timestamp for r in records)
    payload = compress(int(compression), bytes(body))
    attributes = int(compression) & ATTR_COMPRESSION_MASK
    if timestamp_type:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    HEADER_STRUCT.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch, 2, 0, attributes,
        last_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records),
    )
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# ---------------------------------------------------------------- codecs
