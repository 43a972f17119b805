"""The metadata log: `__cluster_metadata-0`, on the same storage layer as every partition.

It is the Raft log of the quorum (raft.log.RaftLog): the leader appends one
batch per controller decision, followers append the leader's batches as they
are, and only committed batches (below the Raft high watermark) are replayed
into the metadata image. Durability is the Raft shell's Flush effect.

Owned by the RaftNode; not thread-safe (event loop only).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

from ..records import Record, decode_records, encode_batch, parse_batches
from ..storage.log import PartitionLog
from ..storage.log_config import LogConfig
from . import records as mrec

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = f"{METADATA_TOPIC}-0"


class MetadataLog:
    def __init__(self, log: PartitionLog) -> None:
        self._log = log
        # (end offset, epoch) of the snapshot the log starts after, if it was compacted.
        self.snapshot_id: tuple[int, int] | None = None

    @classmethod
    def open(cls, directory: Path) -> "MetadataLog":
        config = LogConfig(segment_bytes=64 << 20, retention_ms=-1, retention_bytes=-1,
                           flush_messages=2**62, max_message_bytes=64 << 20)
        return cls(PartitionLog.open(directory / METADATA_PARTITION, config))

    @property
    def directory(self) -> Path:
        return self._log.directory

    # -- RaftLog ----------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_epoch(self) -> int:
        epoch = self._log.latest_epoch
        if epoch < 0 and self.snapshot_id is not None:
            return self.snapshot_id[1]
        return epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        entries = self._log.epochs.entries
        if not entries or epoch < entries[0][0]:
            # Older than anything we hold: only the snapshot can vouch for it. The epoch
            # cache would answer with our first offset, which would let a divergent
            # follower through at the snapshot boundary.
            snap = self.snapshot_id
            if snap is not None and snap[1] <= epoch:
                return snap[1], snap[0]
            return -1, -1
        return self._log.end_offset_for_epoch(epoch)

    def append_as_leader(self, records: list[dict[str, Any]], epoch: int) -> int:
        """One controller decision = one batch, so it is applied whole or not at all."""
        data = self._encode(records, epoch)
        return self._log.append(data, parse_batches(data), leader_epoch=epoch).last_offset

    def append_leader_change(self, epoch: int, leader_id: int) -> int:
        return self.append_as_leader([{"type": mrec.LEADER_CHANGE, "leader_id": leader_id,
                                       "epoch": epoch}], epoch)

    def append_as_follower(self, records: bytes) -> None:
        self._log.append_replicated(records, parse_batches(bytearray(records)))

    def read(self, offset: int, max_bytes: int) -> bytes:
        return self._log.read(offset, max_bytes)

    def truncate_to(self, offset: int) -> None:
        self._log.truncate_to(offset)

    def snapshot(self) -> tuple[int, int] | None:
        return self.snapshot_id

    # -- the shell's side -----------------------------------------------------------------

    async def flush(self) -> int:
        await self._log.flush()
        return self._log.recovery_point

    def set_high_watermark(self, offset: int) -> None:
        self._log.high_watermark = offset

    def committed_batches(self, start: int, end: int
                          ) -> Iterator[tuple[int, list[dict[str, Any]], int]]:
        """(last offset, records, size in bytes) of every batch in [start, end), oldest first."""
        offset = max(start, self.start_offset)
        while offset < end:
            data = self._log.read(offset, 1 << 20, max_offset=end)
            if not data:
                return
            for header in parse_batches(bytearray(data)):
                if header.base_offset >= end:
                    return
                if header.last_offset < offset:
                    continue
                batch = data[header.position:header.position + header.size]
                _, records = decode_records(batch)
                yield (header.last_offset, [mrec.decode(rec.value or b"") for rec in records],
                       header.size)
                offset = header.last_offset + 1

    def reset_to_snapshot(self, end_offset: int, epoch: int) -> None:
        """Drop the whole log; it continues after the snapshot at `end_offset`."""
        self._log.truncate_fully_and_start_at(end_offset)
        self.snapshot_id = (end_offset, epoch)

    def delete_before(self, offset: int, epoch: int) -> None:
        """A snapshot covers everything below `offset`: drop whole segments under it.

        The active segment is rolled first when the snapshot reaches into it, so a
        metadata log with little traffic still shrinks."""
        self.snapshot_id = (offset, epoch)
        if self._log.segments[-1].base_offset < offset <= self._log.log_end_offset:
            self._log.roll()
        self._log.delete_segments_before(offset)

    def epoch_at(self, offset: int) -> int:
        """Leader epoch of the entry at `offset` (-1 if unknown)."""
        epoch = -1
        for e, start in self._log.epochs.entries:
            if start > offset:
                break
            epoch = e
        if epoch < 0 and self.snapshot_id is not None and offset < self.snapshot_id[0]:
            return self.snapshot_id[1]
        return epoch

    def close(self) -> None:
        self._log.close()

    @staticmethod
    def _encode(records: list[dict[str, Any]], epoch: int) -> bytearray:
        now = int(time.time() * 1000)
        encoded = []
        for i, rec in enumerate(records):
            key, value = mrec.encode(rec)
            encoded.append(Record(offset=i, timestamp=now, key=key, value=value, headers=[]))
        return bytearray(encode_batch(encoded, base_offset=0, leader_epoch=epoch))
