"""RecordBatch v2 codec: header parsing, CRC checks, offset patching, every compression codec."""
from __future__ import annotations

import struct
import types

import cramjam
import pytest
from crc32c import crc32c

import kafka.codec
import kafka.record.default_records as kdr
from rillet.protocol.errors import CorruptMessage, InvalidRecord
from rillet.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Record,
    decode_records,
    encode_batch,
    increment_sequence,
    parse_batches,
    set_log_append_time,
    set_offsets,
)

ALL_CODECS = list(Compression)


def sample_records(n: int = 5, base_ts: int = 1_700_000_000_000) -> list[Record]:
    return [
        Record(
            offset=i,
            timestamp=base_ts + i * 7,
            key=None if i == 2 else f"key-{i}".encode(),
            value=None if i == 3 else (f"value-{i}-" * 50).encode(),
            headers=[("h1", b"v1"), ("empty", None)] if i % 2 == 0 else [],
        )
        for i in range(n)
    ]


def crc_ok(batch: bytes | bytearray) -> bool:
    (crc,) = struct.unpack_from(">I", batch, 17)
    return crc == crc32c(bytes(batch[21:]))


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_round_trip_every_codec(codec: Compression) -> None:
    records = sample_records()
    batch = encode_batch(records, compression=codec, producer_id=7, producer_epoch=1, base_sequence=10)
    [header] = parse_batches(batch)
    assert header.compression == codec
    assert header.records_count == 5 and header.last_offset_delta == 4
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 10)
    assert header.last_sequence == 14
    assert header.max_timestamp == records[-1].timestamp
    decoded_header, decoded = decode_records(batch)
    assert decoded_header == header
    assert decoded == records


def test_large_batch_snappy_uses_several_xerial_blocks() -> None:
    records = [Record(i, 1000 + i, None, bytes([i % 251]) * 3000) for i in range(40)]
    batch = encode_batch(records, compression=Compression.SNAPPY)
    assert batch[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    assert decode_records(batch)[1] == records


def test_raw_snappy_as_librdkafka_writes_it_decodes() -> None:
    plain = encode_batch(sample_records())
    body = bytes(cramjam.snappy.compress_raw(plain[BATCH_HEADER_SIZE:]))
    batch = bytearray(plain[:BATCH_HEADER_SIZE] + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, Compression.SNAPPY)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    parse_batches(batch)
    assert decode_records(batch)[1] == sample_records()


def test_lz4_frames_use_independent_blocks_for_java_readers() -> None:
    batch = encode_batch(sample_records(), compression=Compression.LZ4)
    flg = batch[BATCH_HEADER_SIZE + 4]
    assert flg & 0x20, "block independence flag must be set"


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's codecs need python-snappy/lz4/zstandard; back them with cramjam.

    snappy keeps kafka-python's own xerial framing code, so this checks our
    framing against an independent implementation.
    """
    snappy = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    monkeypatch.setattr(kafka.codec, "snappy", snappy)
    monkeypatch.setattr(kafka.codec, "lz4", types.SimpleNamespace())
    monkeypatch.setattr(kafka.codec, "zstd", types.SimpleNamespace())
    monkeypatch.setattr(kdr, "lz4_encode", lambda b: bytes(cramjam.lz4.compress(b)))
    monkeypatch.setattr(kdr, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(b)))
    monkeypatch.setattr(kdr, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(b)))
    monkeypatch.setattr(kdr, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(b)))


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_kafka_python_built_batches_decode(codec: Compression, kafka_python_codecs: None) -> None:
    builder = kdr.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=42, producer_epoch=3, base_sequence=100, batch_size=1 << 20,
    )
    for i in range(20):
        builder.append(i, timestamp=1_600_000_000_000 + i, key=b"k%d" % i,
                       value=b"payload " * 40 + b"%d" % i, headers=[("trace", b"t%d" % i)])
    batch = bytes(builder.build())
    [header] = parse_batches(batch)
    assert header.compression == codec
    assert header.records_count == 20 and header.producer_id == 42 and header.base_sequence == 100
    _, records = decode_records(batch)
    assert [r.key for r in records] == [b"k%d" % i for i in range(20)]
    assert records[7].value == b"payload " * 40 + b"7"
    assert records[7].headers == [("trace", b"t7")]
    assert records[19].timestamp == 1_600_000_000_019 and records[19].offset == 19


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_our_batches_decode_with_kafka_python(codec: Compression, kafka_python_codecs: None) -> None:
    records = sample_records(8)
    batch = encode_batch(records, base_offset=500, compression=codec)
    parsed = kdr.DefaultRecordBatch(bytearray(batch))
    assert parsed.validate_crc()
    got = list(parsed)
    assert [r.offset for r in got] == [500 + i for i in range(8)]
    assert [r.key for r in got] == [r.key for r in records]
    assert [r.value for r in got] == [r.value for r in records]
    assert [r.timestamp for r in got] == [r.timestamp for r in records]


def test_set_offsets_keeps_crc_valid() -> None:
    buf = bytearray(encode_batch(sample_records(3)) + encode_batch(sample_records(2)))
    headers = parse_batches(buf)
    set_offsets(buf, headers[0], 1000, 7)
    set_offsets(buf, headers[1], 1003, 7)
    again = parse_batches(buf)  # verifies the CRCs
    assert [h.base_offset for h in again] == [1000, 1003]
    assert [h.partition_leader_epoch for h in again] == [7, 7]
    assert [h.next_offset for h in again] == [1003, 1005]
    assert [r.offset for r in decode_records(bytes(buf[again[1].position:]))[1]] == [1003, 1004]


def test_set_log_append_time_rewrites_timestamps_and_crc() -> None:
    buf = bytearray(encode_batch(sample_records(3), compression=Compression.GZIP))
    [header] = parse_batches(buf)
    new = set_log_append_time(buf, header, 1_999_000_000_000)
    assert new.timestamp_type == 1 and new.max_timestamp == 1_999_000_000_000
    assert crc_ok(buf)
    assert parse_batches(buf) == [new]
    assert {r.timestamp for r in decode_records(buf)[1]} == {1_999_000_000_000}


def test_header_flags() -> None:
    batch = encode_batch([Record(0, 5, b"\x00\x00\x00\x01", b"")], is_control=True,
                         is_transactional=True, producer_id=3, producer_epoch=0, base_sequence=-1)
    [h] = parse_batches(batch)
    assert h.is_control and h.is_transactional and h.has_producer_id
    assert h.timestamp_type == 0 and h.size == len(batch)
    [plain] = parse_batches(encode_batch([Record(0, 5, None, b"x")]))
    assert not plain.is_control and not plain.has_producer_id


def test_sequence_wraps_like_kafka() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 4) == 2
    assert increment_sequence(5, 3) == 8
    records = [Record(i, 0, None, b"x") for i in range(3)]
    [h] = parse_batches(encode_batch(records, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert h.last_sequence == 0


def test_relative_record_offsets_with_nonzero_base() -> None:
    batch = encode_batch(sample_records(3), base_offset=50)
    assert [r.offset for r in decode_records(batch)[1]] == [50, 51, 52]


# ------------------------------------------------------------- rejection


def test_empty_payload_is_corrupt() -> None:
    with pytest.raises(CorruptMessage):
        parse_batches(b"")


def test_crc_mismatch_is_corrupt() -> None:
    buf = bytearray(encode_batch(sample_records()))
    buf[-3] ^= 0xFF
    with pytest.raises(CorruptMessage, match="CRC"):
        parse_batches(buf)
    assert parse_batches(buf, verify_crc=False)  # framing alone is fine


@pytest.mark.parametrize("cut", [1, 30, 60, 61, 100])
def test_truncated_is_corrupt(cut: int) -> None:
    batch = encode_batch(sample_records())
    with pytest.raises(CorruptMessage, match="truncated"):
        parse_batches(batch + batch[:cut])


def test_bad_magic_and_length_are_corrupt() -> None:
    buf = bytearray(encode_batch(sample_records()))
    buf[16] = 1
    with pytest.raises(CorruptMessage, match="magic"):
        parse_batches(buf)
    buf = bytearray(encode_batch(sample_records()))
    struct.pack_into(">i", buf, 8, 10)
    with pytest.raises(CorruptMessage, match="batch_length"):
        parse_batches(buf)


def test_inconsistent_counts_are_invalid_record() -> None:
    buf = bytearray(encode_batch(sample_records(3)))
    struct.pack_into(">i", buf, 57, 2)  # records_count 2 but last_offset_delta 2
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    with pytest.raises(InvalidRecord):
        parse_batches(buf)
    assert parse_batches(buf, strict=False)
    struct.pack_into(">i", buf, 57, 0)
    struct.pack_into(">i", buf, 23, -1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    with pytest.raises(InvalidRecord):
        parse_batches(buf)


def test_garbage_compressed_body_is_corrupt_on_decode() -> None:
    plain = encode_batch(sample_records())
    buf = bytearray(plain[:BATCH_HEADER_SIZE] + b"not zstd at all")
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, Compression.ZSTD)
    with pytest.raises(CorruptMessage):
        decode_records(buf)


# Batches captured from confluent-kafka (librdkafka 2.x) with enable.idempotence=true, three
# records each, as stored by the broker (base offset rewritten). librdkafka writes raw snappy.
LIBRDKAFKA_BATCHES = {
    "gzip": (
        "000000000000000000000085000000000208cc69130001000000020000018bcfe568000000018bcfe568020000000000"
        "000000000000000000000000031f8b08000000000000034b60606060c93670cbc94c2a4ac94e4ccb4e54284eac2c56c8"
        "48cdc9c947210d98983258ca0c1218989858b20d89d06008d66098c0c0c2c2926d44840623b0062300e7ecefec930000"
        "00"
    ),
    "snappy": (
        "00000000000000000000007e00000000026819b6f70002000000020000018bcfe568000000018bcfe568020000000000"
        "0000010000000000000000000393017060000000046b30466c696272646b61666b6120736179732068656c6c6f320600"
        "343002026804763060000202046b318a3100003105311c3160000404046b328a31001832020268047632"
    ),
    "lz4": (
        "00000000000000000000008b0000000002277001cf0003000000020000018bcfe568000000018bcfe568020000000000"
        "0000020000000000000000000304224d186040824b000000f90e60000000046b30466c696272646b61666b6120736179"
        "732068656c6c6f0600ef3002026804763060000202046b31310010113131008f3160000404046b323100107032020268"
        "04763200000000"
    ),
    "zstd": (
        "00000000000000000000008300000000028927c7b30004000000020000018bcfe568000000018bcfe568020000000000"
        "0000030000000000000000000328b52ffd00584d0200b40360000000046b30466c696272646b61666b61207361797320"
        "68656c6c6f3002026804763060000202046b31313160000404046b32320202680476320400006120b0a82255398a13"
    ),
}


@pytest.mark.parametrize("codec", sorted(LIBRDKAFKA_BATCHES))
def test_librdkafka_batches_decode(codec: str) -> None:
    batch = bytes.fromhex(LIBRDKAFKA_BATCHES[codec])
    [header] = parse_batches(batch)
    assert Compression(header.compression).name == codec.upper()
    assert header.has_producer_id and header.base_sequence == 0 and header.last_sequence == 2
    _, records = decode_records(batch)
    assert [r.key for r in records] == [b"k0", b"k1", b"k2"]
    assert [r.value for r in records] == [b"librdkafka says hello hello hello %d" % i for i in range(3)]
    assert [r.headers for r in records] == [[("h", b"v%d" % i)] for i in range(3)]
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(3)]
