"""Snapshot files of the metadata image, and the records that rebuild an image.

A snapshot is the image at a committed offset written as the records that recreate
it, so loading one is the same replay as the log's. One file per snapshot, named by
end offset and epoch (`<20-digit offset>-<10-digit epoch>.checkpoint`, after Kafka's
naming): a JSON header line (end offset, epoch, record count, CRC-32C of the body),
then one JSON record per line. Files are written whole and renamed into place, so a
crash leaves either the old set or the new one (and maybe a .tmp, removed at start).

Blocking file I/O: callers on the event loop run these in a worker thread.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import crc32c

from ..storage.durable_file import write_durably
from . import records as r
from .image import MetadataImage

SUFFIX = ".checkpoint"


class SnapshotError(Exception):
    """A snapshot that is missing, partial or corrupt."""


def image_records(image: MetadataImage) -> list[dict[str, Any]]:
    """Records that, replayed onto an empty image, rebuild `image`."""
    out: list[dict[str, Any]] = []
    for b in sorted(image.brokers.values(), key=lambda b: b.node_id):
        out.append({"type": r.REGISTER_BROKER, "node_id": b.node_id, "host": b.host,
                    "port": b.port, "rack": b.rack, "epoch": b.epoch, "fenced": b.fenced,
                    "incarnation": b.incarnation})
    for name in sorted(image.topics):
        topic = image.topics[name]
        out.append({"type": r.TOPIC, "name": name, "topic_id": str(topic.topic_id)})
        for p in sorted(topic.partitions):
            part = topic.partitions[p]
            out.append({"type": r.PARTITION, "topic_id": str(topic.topic_id), "partition": p,
                        "replicas": list(part.replicas), "isr": list(part.isr),
                        "leader": part.leader, "leader_epoch": part.leader_epoch,
                        "partition_epoch": part.partition_epoch, "adding": list(part.adding),
                        "removing": list(part.removing)})
    for (resource_type, name) in sorted(image.configs):
        for key, value in sorted(image.configs[(resource_type, name)].items()):
            out.append({"type": r.CONFIG, "resource_type": resource_type, "name": name,
                        "key": key, "value": value})
    if image.next_producer_id:
        out.append({"type": r.PRODUCER_IDS, "next_producer_id": image.next_producer_id})
    return out


def _name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def _encode(end_offset: int, epoch: int, records: list[dict[str, Any]]) -> bytes:
    body = "".join(json.dumps(rec, separators=(",", ":")) + "\n" for rec in records).encode()
    header = json.dumps({"end_offset": end_offset, "epoch": epoch, "count": len(records),
                         "crc": crc32c.crc32c(body)}).encode()
    return header + b"\n" + body


def _decode(data: bytes, where: str) -> tuple[int, int, list[dict[str, Any]]]:
    head, sep, body = data.partition(b"\n")
    try:
        header = json.loads(head)
        if not sep or crc32c.crc32c(body) != header["crc"]:
            raise ValueError("checksum mismatch")
        records = [json.loads(line) for line in body.splitlines() if line]
        if len(records) != header["count"]:
            raise ValueError(f"{len(records)} records, header says {header['count']}")
        return int(header["end_offset"]), int(header["epoch"]), records
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"snapshot {where} is corrupt: {exc}") from None


class SnapshotStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.glob("*.tmp"):
            leftover.unlink()  # a crash in the middle of a write

    def path(self, end_offset: int, epoch: int) -> Path:
        return self.directory / _name(end_offset, epoch)

    def snapshots(self) -> list[tuple[int, int]]:
        out = []
        for f in self.directory.glob(f"*{SUFFIX}"):
            offset, _, epoch = f.name[:-len(SUFFIX)].partition("-")
            if offset.isdigit() and epoch.isdigit():
                out.append((int(offset), int(epoch)))
        return sorted(out)

    def latest(self) -> tuple[int, int] | None:
        found = self.snapshots()
        return found[-1] if found else None

    def write(self, end_offset: int, epoch: int, records: list[dict[str, Any]]) -> Path:
        return self._write_atomically(end_offset, epoch, _encode(end_offset, epoch, records))

    def install(self, end_offset: int, epoch: int, data: bytes) -> None:
        """Store a snapshot fetched from the leader, after checking every byte of it."""
        got = _decode(data, f"{end_offset}-{epoch} from the leader")
        if got[:2] != (end_offset, epoch):
            raise SnapshotError(f"fetched snapshot is {got[0]}-{got[1]}, "
                                f"not {end_offset}-{epoch}")
        self._write_atomically(end_offset, epoch, data)

    def read(self, end_offset: int, epoch: int) -> list[dict[str, Any]]:
        path = self.path(end_offset, epoch)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {path}") from None
        return _decode(data, str(path))[2]

    def size(self, end_offset: int, epoch: int) -> int:
        try:
            return self.path(end_offset, epoch).stat().st_size
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {end_offset}-{epoch}") from None

    def read_chunk(self, end_offset: int, epoch: int, position: int, max_bytes: int) -> bytes:
        try:
            with open(self.path(end_offset, epoch), "rb") as f:
                f.seek(position)
                return f.read(max_bytes)
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {end_offset}-{epoch}") from None

    def delete_older_than(self, end_offset: int) -> None:
        for offset, epoch in self.snapshots():
            if offset < end_offset:
                self.path(offset, epoch).unlink(missing_ok=True)

    def _write_atomically(self, end_offset: int, epoch: int, data: bytes) -> Path:
        final = self.path(end_offset, epoch)
        write_durably(final, data)
        return final
