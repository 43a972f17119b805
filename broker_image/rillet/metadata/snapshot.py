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
import re
from pathlib import Path
from typing import Any

import crc32c

from ..storage.durable_file import write_durably
from . import directories as dirs
from . import records as r
from .image import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo

SUFFIX = ".checkpoint"
_NAME = re.compile(r"(\d{20})-(\d{10})" + re.escape(SUFFIX), re.ASCII)


class SnapshotError(Exception):
    """A snapshot that is missing, partial or corrupt."""


# -- image <-> records -----------------------------------------------------------------------

def image_records(image: MetadataImage) -> list[dict[str, Any]]:
    """Records that, replayed onto `MetadataImage(cluster_id=...)`, rebuild `image`.

    Ordered by node id, topic name, partition, config resource and key, so the same
    image always gives the same records (and the same snapshot bytes).
    """
    out = [_broker_record(b) for _, b in sorted(image.brokers.items())]
    for name in sorted(image.topics):
        out += _topic_records(image.topics[name])
    for resource, entries in sorted(image.configs.items()):
        out += [{"type": r.CONFIG, "resource_type": resource[0], "name": resource[1],
                 "key": key, "value": value} for key, value in sorted(entries.items())]
    if image.next_producer_id:
        out.append({"type": r.PRODUCER_IDS, "next_producer_id": image.next_producer_id})
    out += [r.scram_record(user, mech, cred) for (user, mech), cred in sorted(image.scram.items())]
    out += [r.acl_record(b) for b in sorted(image.acls, key=lambda b: tuple(vars(b).values()))]
    out += [r.client_quota_record(entity, key, value)
            for entity, values in sorted(image.client_quotas.items(), key=lambda kv: repr(kv[0]))
            for key, value in sorted(values.items())]
    return out


def _broker_record(b: BrokerInfo) -> dict[str, Any]:
    # registered_offset: replay would otherwise stamp the snapshot's own offset.
    return {"type": r.REGISTER_BROKER, "node_id": b.node_id, "host": b.host, "port": b.port,
            "rack": b.rack, "epoch": b.epoch, "fenced": b.fenced,
            "incarnation": b.incarnation, "registered_offset": b.registered_offset,
            "endpoints": [list(e) for e in b.endpoints],
            "log_dirs": [str(d) for d in b.log_dirs]}


def _topic_records(topic: TopicInfo) -> list[dict[str, Any]]:
    tid = str(topic.topic_id)
    return [{"type": r.TOPIC, "name": topic.name, "topic_id": tid}] + [
        _partition_record(tid, topic.partitions[p]) for p in sorted(topic.partitions)]


def _partition_record(topic_id: str, p: PartitionInfo) -> dict[str, Any]:
    # A PARTITION record sets partition_epoch as given (PARTITION_CHANGE would add one).
    return {"type": r.PARTITION, "topic_id": topic_id, "partition": p.partition,
            "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
            "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            "adding": list(p.adding), "removing": list(p.removing),
            "directories": dirs.to_record(p.directories)}


# -- file format -----------------------------------------------------------------------------

def _name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def _encode(end_offset: int, epoch: int, records: list[dict[str, Any]]) -> bytes:
    body = "".join(json.dumps(rec, separators=(",", ":")) + "\n" for rec in records).encode()
    header = json.dumps({"end_offset": end_offset, "epoch": epoch, "count": len(records),
                         "crc": crc32c.crc32c(body)}).encode()
    return header + b"\n" + body


def _decode(data: bytes, end_offset: int, epoch: int, where: str) -> list[dict[str, Any]]:
    """The records of a whole snapshot (end_offset, epoch), or SnapshotError naming `where`."""
    try:
        return _parse(data, end_offset, epoch)
    except (ValueError, KeyError, TypeError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise SnapshotError(f"snapshot {where} is corrupt or partial: {exc}") from None


def _parse(data: bytes, end_offset: int, epoch: int) -> list[dict[str, Any]]:
    head, newline, body = data.partition(b"\n")
    if not newline:
        raise ValueError("no complete header line")
    header = json.loads(head)
    if (header["end_offset"], header["epoch"]) != (end_offset, epoch):
        raise ValueError(f"header is for {header['end_offset']}-{header['epoch']}")
    if crc32c.crc32c(body) != header["crc"]:
        raise ValueError("CRC-32C of the body does not match the header")
    lines = body.split(b"\n")
    if lines.pop() != b"":
        raise ValueError("last record line is not terminated")
    if len(lines) != header["count"]:
        raise ValueError(f"{len(lines)} records, header says {header['count']}")
    return [_record(line) for line in lines]


def _record(line: bytes) -> dict[str, Any]:
    rec = json.loads(line)
    if not isinstance(rec, dict) or rec.get("type") not in r.RECORD_TYPES:
        raise ValueError(f"not a metadata record: {line[:80]!r}")
    return rec


# -- the store -------------------------------------------------------------------------------

class SnapshotStore:
    """The snapshot files of one directory.

    Owned by the broker's Snapshotter, the only writer (write, install, delete); the
    FetchSnapshot handler only reads. A file never changes once renamed into place, so
    readers need no lock: at worst a snapshot deleted meanwhile reads as missing.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.glob("*.tmp"):
            leftover.unlink()  # a crash in the middle of a write

    def path(self, end_offset: int, epoch: int) -> Path:
        return self.directory / _name(end_offset, epoch)

    def snapshots(self) -> list[tuple[int, int]]:
        """(end_offset, epoch) of every snapshot file, oldest first."""
        found = (_NAME.fullmatch(f.name) for f in self.directory.iterdir())
        return sorted((int(m[1]), int(m[2])) for m in found if m)

    def latest(self) -> tuple[int, int] | None:
        found = self.snapshots()
        return found[-1] if found else None

    def write(self, end_offset: int, epoch: int, records: list[dict[str, Any]]) -> Path:
        path = self.path(end_offset, epoch)
        write_durably(path, _encode(end_offset, epoch, records))
        return path

    def install(self, end_offset: int, epoch: int, data: bytes) -> None:
        """Store a snapshot fetched from the leader, after checking every byte of it."""
        _decode(data, end_offset, epoch, f"{_name(end_offset, epoch)} (fetched)")
        write_durably(self.path(end_offset, epoch), data)

    def read(self, end_offset: int, epoch: int) -> list[dict[str, Any]]:
        path = self.path(end_offset, epoch)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {path}") from None
        return _decode(data, end_offset, epoch, str(path))

    def size(self, end_offset: int, epoch: int) -> int:
        path = self.path(end_offset, epoch)
        try:
            return path.stat().st_size
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {path}") from None

    def read_chunk(self, end_offset: int, epoch: int, position: int, max_bytes: int) -> bytes:
        """At most max_bytes of the file from position (FetchSnapshot); b"" past the end."""
        path = self.path(end_offset, epoch)
        if position < 0 or max_bytes < 0:
            # f.read(-1) would send the whole file, whatever the chunk limit.
            raise SnapshotError(f"bad range of {path}: position {position}, "
                                f"max_bytes {max_bytes}")
        try:
            with open(path, "rb") as f:
                f.seek(position)
                return f.read(max_bytes)
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {path}") from None

    def delete_older_than(self, end_offset: int) -> None:
        """Drop snapshots ending before end_offset; that one and newer ones stay."""
        for offset, epoch in self.snapshots():
            if offset < end_offset:
                self.path(offset, epoch).unlink(missing_ok=True)
