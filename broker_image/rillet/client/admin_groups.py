"""Admin APIs about consumer groups: list, describe (members and their assignments),
committed offsets, delete, and lag.

The lag joins DescribeGroups (members and their assignments), OffsetFetch (committed
offsets) and ListOffsets (end offsets at the partitions' leaders) per partition, as
kafka-consumer-groups --describe does.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..protocol.consumer_protocol import parse_assignment
from .admin_base import DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR, LIST_GROUPS, OFFSET_FETCH
from .admin_topics import TopicAdmin
from .connection import BrokerConnection, raise_for


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int          # -1: nothing committed
    end_offset: int                # high watermark
    lag: int | None                # None when nothing is committed (shown as "-" by Kafka)
    member_id: str | None = None   # consumer holding the partition now, if any
    client_id: str | None = None
    host: str | None = None


class GroupAdmin(TopicAdmin):
    """Needs TopicAdmin's end offsets for the lag."""

    async def _coordinator(self, group_id: str) -> BrokerConnection:
        for attempt in range(50):
            resp = await self._any(FIND_COORDINATOR, 3, {"key": group_id, "key_type": 0})
            code = int(resp.error_code)
            if code in (14, 15) and attempt < 49:  # loading / not available yet: retry
                await asyncio.sleep(0.1)
                continue
            raise_for(resp.error_code, f"find coordinator of {group_id}")
            return self._conn(resp.host, resp.port)
        raise AssertionError("unreachable")

    async def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker."""
        cluster = await self._cluster([])
        out = []
        for host, port in cluster.brokers.values():
            resp = await self._conn(host, port).request(LIST_GROUPS, 4,
                                                        {"states_filter": states or []})
            raise_for(resp.error_code, "list groups")
            out += [(g.group_id, g.protocol_type, g.group_state) for g in resp.groups]
        return sorted(out)

    async def describe_group(self, group_id: str) -> GroupDescription:
        conn = await self._coordinator(group_id)
        resp = await conn.request(DESCRIBE_GROUPS, 5, {"groups": [group_id],
                                                       "include_authorized_operations": False})
        g = resp.groups[0]
        raise_for(g.error_code, f"describe group {group_id}")
        members = tuple(MemberDescription(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            parse_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer"
            else ()) for m in g.members)
        return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                members)

    async def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        conn = await self._coordinator(group_id)
        resp = await conn.request(OFFSET_FETCH, 7, {"group_id": group_id, "topics": None,
                                                    "require_stable": False})
        raise_for(resp.error_code, f"offset fetch {group_id}")
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                raise_for(p.error_code, f"offset fetch {group_id} {t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = p.committed_offset
        return out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """group id -> error code (0 = deleted)."""
        out = {}
        for gid in group_ids:
            conn = await self._coordinator(gid)
            resp = await conn.request(DELETE_GROUPS, 2, {"groups_names": [gid]})
            out.update({r.group_id: int(r.error_code) for r in resp.results})
        return out

    async def describe_group_lag(self, group_id: str,
                                 group: GroupDescription | None = None) -> list[PartitionLag]:
        """Per partition: committed offset, end offset (high watermark), lag and owner.

        Covers every partition with a committed offset and every partition
        currently assigned to a member, sorted by topic and partition. ``group``:
        a description the caller already has (the owners are taken from it).
        """
        if group is None:
            group = await self.describe_group(group_id)
        committed = await self.committed_offsets(group_id)
        owners: dict[tuple[str, int], MemberDescription] = {}
        for m in group.members:
            for tp in m.assignment:
                owners[tp] = m
        partitions = sorted(set(committed) | set(owners))
        ends = await self.end_offsets(partitions)
        out = []
        for tp in partitions:
            c = committed.get(tp, -1)
            end = ends[tp]
            owner = owners.get(tp)
            out.append(PartitionLag(tp[0], tp[1], c, end, max(end - c, 0) if c >= 0 else None,
                                    owner.member_id if owner else None,
                                    owner.client_id if owner else None,
                                    owner.client_host if owner else None))
        return out
