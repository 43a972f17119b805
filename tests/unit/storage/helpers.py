"""Shared helpers for the storage unit tests: batch builders and a settable clock."""
from __future__ import annotations

from pathlib import Path

from rillet.records import Compression, Record, decode_records, encode_batch, parse_batches
from rillet.storage.log import AppendInfo, PartitionLog
from rillet.storage.log_config import LogConfig


class FakeClock:
    def __init__(self, seconds: float = 1_700_000_000.0) -> None:
        self.now = seconds

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


def make_batch(n: int = 3, *, ts: int = 1_700_000_000_000, value_size: int = 100, tag: str = "",
               compression: Compression = Compression.NONE, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    records = [Record(i, ts + i, f"k{tag}{i}".encode(), (f"{tag}-{i}-".encode() * value_size)[:value_size])
               for i in range(n)]
    return encode_batch(records, compression=compression, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence)


def append(plog: PartitionLog, *batches: bytes, epoch: int = 0) -> AppendInfo:
    data = bytearray(b"".join(batches))
    info = plog.append(data, parse_batches(data), leader_epoch=epoch)
    plog.high_watermark = plog.log_end_offset
    return info


def read_all_offsets(plog: PartitionLog) -> list[int]:
    """Every record offset from the log start to the log end, read batch by batch."""
    return [r.offset for _, batch in plog.batches() for r in decode_records(batch)[1]]


def open_log(path: Path, clock: FakeClock | None = None, **config: object) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), clock=clock or FakeClock())
