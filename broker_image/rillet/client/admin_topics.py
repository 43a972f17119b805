"""Admin APIs about topics and partitions: create, describe, grow, delete, end offsets,
replica assignment and partition moves (KIP-455)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .admin_base import (ALTER_REASSIGNMENTS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS,
                         LATEST, LIST_OFFSETS, LIST_REASSIGNMENTS, METADATA, AdminBase)
from .connection import raise_for


@dataclass(frozen=True)
class Reassignment:
    """A partition move in progress (ListPartitionReassignments)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    """A topic as Metadata reports it: id (UUID text), replicas and ISR per partition."""
    name: str
    topic_id: str
    replicas: dict[int, tuple[int, ...]]
    isr: dict[int, tuple[int, ...]]
    leaders: dict[int, int]


class TopicAdmin(AdminBase):
    async def create_topic(self, name: str, partitions: int, replication_factor: int = 1,
                           configs: dict[str, str] | None = None) -> None:
        body = {"topics": [{"name": name, "num_partitions": partitions,
                            "replication_factor": replication_factor, "assignments": [],
                            "configs": [{"name": k, "value": v}
                                        for k, v in (configs or {}).items()]}],
                "timeout": 30000, "validate_only": False}
        resp = await self._any(CREATE_TOPICS, 5, body)
        for t in resp.topics:
            raise_for(t.error_code, f"create topic {t.name}")

    async def end_offsets(self, partitions: list[tuple[str, int]],
                          timestamp: int = LATEST) -> dict[tuple[str, int], int]:
        """ListOffsets at each partition's leader (latest = high watermark)."""
        if not partitions:
            return {}
        cluster = await self._cluster(sorted({t for t, _ in partitions}))
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            by_leader.setdefault(cluster.leaders.get(tp, -1), []).append(tp)
        out: dict[tuple[str, int], int] = {}
        for leader, tps in by_leader.items():
            if leader not in cluster.brokers:
                raise_for(5, f"no leader for {tps}")
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp})
            resp = await self._conn(*cluster.brokers[leader]).request(LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
            for t in resp.topics:
                for p in t.partitions:
                    raise_for(p.error_code, f"list offsets {t.name}-{p.partition_index}")
                    out[(t.name, p.partition_index)] = p.offset
        return out

    async def describe_topic(self, name: str) -> TopicDescription | None:
        """The topic by Metadata v12, or None when it does not exist."""
        resp = await self._any(METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                              "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
        t = resp.topics[0]
        if int(t.error_code) == 3:  # UNKNOWN_TOPIC_OR_PARTITION
            return None
        raise_for(t.error_code, f"describe topic {name}")
        return TopicDescription(
            t.name, str(t.topic_id),
            {p.partition_index: tuple(p.replica_nodes) for p in t.partitions},
            {p.partition_index: tuple(p.isr_nodes) for p in t.partitions},
            {p.partition_index: p.leader_id for p in t.partitions})

    async def assignment(self, topics: list[str] | None = None
                         ) -> dict[tuple[str, int], tuple[int, ...]]:
        """(topic, partition) -> replicas, for every topic (internal ones included) or those
        named: what a move planner needs to weigh brokers' loads."""
        return {tp: replicas
                for tp, (replicas, _) in (await self._partition_states(topics)).items()}

    async def create_partitions(self, name: str, total: int) -> None:
        resp = await self._any(CREATE_PARTITIONS, 3, {
            "topics": [{"name": name, "count": total, "assignments": None}],
            "timeout_ms": 30000, "validate_only": False})
        for r in resp.results:
            raise_for(r.error_code, f"create partitions of {r.name}")

    async def delete_topic(self, name: str) -> bool:
        """True when deleted, False when there was no such topic."""
        resp = await self._any(DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": 30000})
        r = resp.responses[0]
        if int(r.error_code) == 3:
            return False
        raise_for(r.error_code, f"delete topic {name}")
        return True

    # -- partition reassignment (KIP-455) ---------------------------------------------

    async def alter_partition_reassignments(
            self, moves: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], int]:
        """Start moves ((topic, partition) -> target replicas) or cancel them (None);
        (topic, partition) -> error code (0 = accepted)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), replicas in moves.items():
            topics.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
        resp = await self._any(ALTER_REASSIGNMENTS, 0, {
            "timeout": 30000, "topics": [{"name": t, "partitions": ps}
                                         for t, ps in topics.items()]})
        raise_for(resp.error_code, "alter partition reassignments")
        return {(t.name, p.partition_index): int(p.error_code)
                for t in resp.responses for p in t.partitions}

    async def list_partition_reassignments(
            self, topics: dict[str, list[int]] | None = None
    ) -> dict[tuple[str, int], Reassignment]:
        """The moves in progress: all of them, or those of `topics` (name -> partitions)."""
        resp = await self._any(LIST_REASSIGNMENTS, 0, {
            "timeout": 30000,
            "topics": None if topics is None else [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
        raise_for(resp.error_code, "list partition reassignments")
        return {(t.name, p.partition_index): Reassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in resp.topics for p in t.partitions}
