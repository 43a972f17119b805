"""Admin APIs about the cluster and its brokers: the quorum, the brokers, their disks,
ISR health, unregistering (what a scale-down needs).

DescribeLogDirs is asked of every broker, since each answers only for its own disks.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .admin_base import (UNREACHABLE, DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS, DESCRIBE_QUORUM,
                         UNREGISTER_BROKER, AdminBase)
from .connection import raise_for


@dataclass(frozen=True)
class QuorumDescription:
    """The metadata quorum as its leader reports it (DescribeQuorum)."""
    leader_id: int
    epoch: int
    high_watermark: int
    voters: dict[int, int]   # node id -> log end offset
    observers: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]   # node id -> host, port, rack


def max_partition_sizes(by_broker: Mapping[int, Mapping[tuple[str, int], int]]
                        ) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the largest size any broker reports for its replica."""
    out: dict[tuple[str, int], int] = {}
    for sizes in by_broker.values():
        for tp, size in sizes.items():
            out[tp] = max(size, out.get(tp, size))
    return out


def short_isr(replicas: Mapping[tuple[str, int], tuple[int, ...]],
              isr: Mapping[tuple[str, int], tuple[int, ...]]) -> list[tuple[str, int]]:
    """The partitions whose ISR has fewer members than their replicas, sorted."""
    return sorted(tp for tp, rs in replicas.items() if len(isr.get(tp, ())) < len(rs))


def log_dir_sizes(results: Iterable[Any]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> bytes, from DescribeLogDirs results of one broker.

    A dir reporting an error has nothing to count; a future replica (a move between
    dirs) is a copy, not the replica itself."""
    out: dict[tuple[str, int], int] = {}
    for d in results:
        if int(getattr(d.error_code, "value", d.error_code)):
            continue
        for t in d.topics:
            for p in t.partitions:
                if not p.is_future_key:
                    out[(t.name, p.partition_index)] = p.partition_size
    return out


class ClusterAdmin(AdminBase):
    async def describe_quorum(self) -> QuorumDescription:
        resp = await self._any(DESCRIBE_QUORUM, 1, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        raise_for(resp.error_code, "describe quorum")
        p = resp.topics[0].partitions[0]
        raise_for(p.error_code, "describe quorum")
        return QuorumDescription(p.leader_id, p.leader_epoch, p.high_watermark,
                                 {v.replica_id: v.log_end_offset for v in p.current_voters},
                                 {o.replica_id: o.log_end_offset for o in p.observers})

    async def describe_cluster(self) -> ClusterDescription:
        resp = await self._any(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations":
                                                     False})
        raise_for(resp.error_code, "describe cluster")
        return ClusterDescription(resp.cluster_id, resp.controller_id,
                                  {b.broker_id: (b.host, b.port, b.rack) for b in resp.brokers})

    async def describe_log_dirs(self) -> dict[int, dict[tuple[str, int], int]]:
        """Broker id -> {(topic, partition): size in bytes} of the replicas on its disks.

        DescribeLogDirs is answered by each broker for itself, so every broker that
        Metadata lists is asked directly, all at once. A broker that cannot be reached
        (down, or not answering within the client's timeout) is left out rather than
        failing the call: a plan must still be made while one broker is away. An error
        code in an answer does raise.
        """
        cluster = await self._cluster([])
        ids = sorted(cluster.brokers)
        answers = await asyncio.gather(*(self._log_dirs_at(*cluster.brokers[i]) for i in ids))
        return {i: sizes for i, sizes in zip(ids, answers) if sizes is not None}

    async def _log_dirs_at(self, host: str, port: int) -> dict[tuple[str, int], int] | None:
        try:
            resp = await self._conn(host, port).request(DESCRIBE_LOG_DIRS, 4, {"topics": None})
        except UNREACHABLE:
            return None
        raise_for(resp.error_code, f"describe log dirs at {host}:{port}")
        return log_dir_sizes(resp.results)

    async def partition_sizes(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the largest replica's size in bytes among the brokers
        that answer (a lagging follower's copy is smaller: the largest is what a move
        has to copy)."""
        return max_partition_sizes(await self.describe_log_dirs())

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: the cluster forgets `broker_id`.

        Refused (InvalidRequest, the broker's message naming the partitions) while any
        partition still lists the broker as a replica; BrokerIdNotRegistered when it is
        not registered. Stop the broker first: a running one registers again.
        """
        resp = await self._any(UNREGISTER_BROKER, 0, {"broker_id": broker_id})
        raise_for(resp.error_code, f"unregister broker {broker_id}", resp.error_message)

    async def isr(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """(topic, partition) -> in-sync replicas, for every topic, as Metadata reports."""
        return {tp: isr for tp, (_, isr) in (await self._partition_states(None)).items()}

    async def under_replicated(self) -> list[tuple[str, int]]:
        """The partitions, of every topic, whose ISR is shorter than their replica list."""
        states = await self._partition_states(None)
        return short_isr({tp: rs for tp, (rs, _) in states.items()},
                         {tp: isr for tp, (_, isr) in states.items()})
