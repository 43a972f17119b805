"""Records of the __transaction_state topic, laid out as Kafka lays them out.

Key (TransactionLogKey v0): ``version int16 = 0, transactional_id string``.
Value (TransactionLogValue v0): ``version int16 = 0, producer_id int64, producer_epoch int16,
transaction_timeout_ms int32, transaction_status int8, partitions [topic string,
[partition int32]] (nullable), last_update_timestamp_ms int64, start_timestamp_ms int64``.
A null value is a tombstone (an expired transactional id) that compaction removes.
Kafka's own tools (kafka-dump-log --transaction-log-decoder) read these records.

Which partition holds an id: Kafka's abs(transactionalId.hashCode) % partitions, the same
function as for groups.

Thread safety: pure functions over the bytes passed in.
"""
from __future__ import annotations

import struct

from ..protocol.fields import FieldReader, FieldWriter
from .metadata import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0
_I8 = struct.Struct(">b")


def txn_key(transactional_id: str) -> bytes:
    return FieldWriter().i16(KEY_VERSION).string(transactional_id).bytes()


def decode_txn_key(data: bytes) -> str | None:
    """The transactional id; None for key versions this broker does not know."""
    r = FieldReader(data)
    if r.i16() != KEY_VERSION:
        return None
    return r.string() or ""


def txn_value(m: TxnMetadata) -> bytes:
    w = FieldWriter().i16(VALUE_VERSION).i64(m.producer_id).i16(m.producer_epoch)
    w.i32(m.timeout_ms)
    w.out += _I8.pack(m.state.value)
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(p)
    w.i32(len(by_topic))
    for topic, parts in by_topic.items():
        w.string(topic).i32(len(parts))
        for p in parts:
            w.i32(p)
    return w.i64(m.last_update_ms).i64(m.start_ms).bytes()


def decode_txn_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = FieldReader(data)
    version = r.i16()
    if version != VALUE_VERSION:   # v1 is flexible (Kafka 4 with transaction.version 2)
        raise ValueError(f"transaction log value version {version} is not read here")
    producer_id, epoch, timeout = r.i64(), r.i16(), r.i32()
    (status,) = _I8.unpack_from(r.data, r.pos)
    r.pos += 1
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(r.i32(), 0)):
        topic = r.string() or ""
        partitions.update((topic, r.i32()) for _ in range(r.i32()))
    last_update, start = r.i64(), r.i64()
    return TxnMetadata(transactional_id, producer_id, epoch, timeout, TxnState(status),
                       frozenset(partitions), start, last_update)
