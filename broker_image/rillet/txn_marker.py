"""Transaction markers: the COMMIT / ABORT control batches ending a transaction in a partition.

A marker is a control batch (attributes: transactional + control) of one record from the
producer whose transaction it ends, written with its producer id and epoch and no sequence
(-1). Its record key is the control record type (``version int16 = 0, type int16``: 0 ABORT,
1 COMMIT) and its value Kafka's EndTxnMarker (``version int16 = 0, coordinator_epoch
int32``), so consumers skip it as they skip any control batch.

Thread safety: pure functions over the bytes passed in.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from rillet.protocol.errors import CorruptMessage
from rillet.records import BatchHeader, Record, decode_records, encode_batch

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """What one WriteTxnMarkers entry asks of every partition it names."""
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def encode_marker(marker: TxnMarker, timestamp_ms: int) -> bytes:
    """The control batch for ``marker`` (offset 0; the log assigns the real one)."""
    key = _KEY.pack(0, COMMIT if marker.commit else ABORT)
    value = _VALUE.pack(0, marker.coordinator_epoch)
    return encode_batch([Record(offset=0, timestamp=timestamp_ms, key=key, value=value)],
                        producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                        base_sequence=-1, is_control=True, is_transactional=True)


def decode_marker(header: BatchHeader, batch: bytes | bytearray | memoryview
                  ) -> TxnMarker | None:
    """The marker a control batch carries (``batch``: its whole bytes); None for the other
    control records (KRaft's leader change, snapshot headers), which end no transaction."""
    _, records = decode_records(batch)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptMessage(f"control batch at offset {header.base_offset} has no control key")
    _version, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value or b""
    coordinator_epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return TxnMarker(header.producer_id, header.producer_epoch, kind == COMMIT,
                     coordinator_epoch)
