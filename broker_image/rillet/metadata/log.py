"""The metadata log: `__cluster_metadata`, on the same storage layer as every partition.

Every controller decision is one batch, fsynced before it is applied, so an
image is never ahead of what a restart would rebuild.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

from ..records import Record, decode_records, encode_batch, parse_batches
from ..storage.log import LogConfig, PartitionLog
from . import records as mrec

METADATA_TOPIC = "__cluster_metadata"


class MetadataLog:
    """Owned by the controller; not thread-safe (event loop only)."""

    def __init__(self, log: PartitionLog) -> None:
        self._log = log

    @classmethod
    def open(cls, directory: Path) -> "MetadataLog":
        config = LogConfig(segment_bytes=64 << 20, retention_ms=-1, retention_bytes=-1,
                           flush_messages=1, max_message_bytes=64 << 20)
        return cls(PartitionLog.open(directory / f"{METADATA_TOPIC}-0", config))

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    def replay_batches(self) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """(last offset, records) of every committed batch, oldest first."""
        for header, batch in self._log.batches():
            _, records = decode_records(batch)
            yield header.last_offset, [mrec.decode(rec.value or b"") for rec in records]

    async def append(self, records: list[dict[str, Any]], leader_epoch: int) -> int:
        """Append one batch durably; returns its last offset."""
        now = int(time.time() * 1000)
        encoded = []
        for i, rec in enumerate(records):
            key, value = mrec.encode(rec)
            encoded.append(Record(offset=i, timestamp=now, key=key, value=value, headers=[]))
        data = bytearray(encode_batch(encoded, base_offset=0, leader_epoch=leader_epoch))
        info = self._log.append(data, parse_batches(data), leader_epoch=leader_epoch)
        await self._log.flush()
        self._log.high_watermark = self._log.log_end_offset
        return info.last_offset

    def close(self) -> None:
        self._log.close()
