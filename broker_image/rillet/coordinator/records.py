"""Records of the __consumer_offsets topic, laid out as Kafka lays them out.

Keys: version 0/1 = offset commit (group, topic, partition), version 2 =
group metadata (group). Values: offset commit v1 (with expire timestamp) /
v3 (with leader epoch); group metadata v3 (with static member ids). A null
value is a tombstone that compaction eventually removes.
Also: which offsets partition owns a group (Java String.hashCode, as Kafka).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol.fields import FieldReader, FieldWriter
from .group_snapshot import GroupSnapshot, LoadedMember
from .group_types import OffsetAndMetadata

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2

def group_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % numPartitions, with Java's String.hashCode."""
    h = 0
    data = group_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_partitions


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return (FieldWriter().i16(OFFSET_KEY_VERSION).string(group_id).string(topic)
            .i32(partition).bytes())


def group_key(group_id: str) -> bytes:
    return FieldWriter().i16(GROUP_KEY_VERSION).string(group_id).bytes()


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """None for key versions this broker does not know (skipped on load)."""
    r = FieldReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None


def offset_value(o: OffsetAndMetadata) -> bytes:
    if o.expire_timestamp is not None:
        return (FieldWriter().i16(1).i64(o.offset).string(o.metadata).i64(o.commit_timestamp)
                .i64(o.expire_timestamp).bytes())
    return (FieldWriter().i16(3).i64(o.offset).i32(o.leader_epoch).string(o.metadata)
            .i64(o.commit_timestamp).bytes())


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = FieldReader(data)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else None
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts, expire_ts)


def group_value(s: GroupSnapshot) -> bytes:
    w = (FieldWriter().i16(3).string(s.protocol_type).i32(s.generation_id)
         .string(s.protocol_name).string(s.leader_id).i64(s.state_timestamp)
         .i32(len(s.members)))
    for m in s.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
         .string(m.client_host).i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms)
         .blob(m.subscription).blob(m.assignment))
    return w.bytes()


def decode_group_value(data: bytes) -> GroupSnapshot:
    r = FieldReader(data)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else 0
        session_timeout = r.i32()
        members.append(LoadedMember(member_id, instance_id, client_id, client_host,
                                    rebalance_timeout or session_timeout, session_timeout,
                                    r.blob() or b"", r.blob() or b""))
    return GroupSnapshot(protocol_type, generation, protocol, leader, state_ts, members)
