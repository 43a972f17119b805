"""Admin operations for the operator, the CLI and the tests.

Fixed, modern request versions that rillet serves (this client talks to
rillet; it does not negotiate down for old brokers). The consumer-group
describe joins DescribeGroups (members and their assignments), OffsetFetch
(committed offsets) and ListOffsets (end offsets at the partitions'
leaders) into per-partition lag, as kafka-consumer-groups --describe does.

The broker-level calls a scale-down needs: replica sizes per broker (DescribeLogDirs,
asked of every broker, since each answers only for its own disks), under-replicated
partitions, dynamic broker configs (throttles) and UnregisterBroker.
"""
from __future__ import annotations

import asyncio
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..protocol.errors import BrokerNotAvailable
from .connection import BrokerConnection, KafkaClientError, raise_for

METADATA, LIST_OFFSETS, FIND_COORDINATOR, OFFSET_FETCH = 3, 2, 10, 9
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, CREATE_TOPICS = 15, 16, 42, 19
DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 55, 60
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 20, 37, 32, 44
DESCRIBE_LOG_DIRS, UNREGISTER_BROKER = 35, 64
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
# DescribeConfigs config_source ids.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
CLUSTER_DEFAULT = ""  # the broker resource name of the cluster-wide default
# What a broker that is down or gone looks like to a request.
_UNREACHABLE = (OSError, asyncio.TimeoutError, KafkaClientError)
SET_CONFIG, DELETE_CONFIG = 0, 1
LATEST, EARLIEST = -1, -2


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


def parse_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """Partitions of a consumer-protocol Assignment (ConsumerProtocolAssignment, any version)."""
    if len(data) < 6:
        return ()
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(max(topics, 0)):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + n].decode("utf-8")
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            (p,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out.append((topic, p))
    return tuple(out)


@dataclass(frozen=True)
class Reassignment:
    """A partition move in progress (ListPartitionReassignments)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


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


@dataclass(frozen=True)
class TopicDescription:
    """A topic as Metadata reports it: id (UUID text), replicas and ISR per partition."""
    name: str
    topic_id: str
    replicas: dict[int, tuple[int, ...]]
    isr: dict[int, tuple[int, ...]]
    leaders: dict[int, int]


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


def _log_dir_sizes(results: Iterable[Any]) -> dict[tuple[str, int], int]:
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


def _broker_resource_name(broker: int | None) -> str:
    return CLUSTER_DEFAULT if broker is None else str(broker)


@dataclass
class _Cluster:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)


class AdminClient:
    """Use as `async with AdminClient("127.0.0.1:9092") as admin: ...`."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """`ssl_context`: for an SSL listener (with the client's certificate for mTLS); every
        broker is then dialled with it, as the listener's advertised addresses are."""
        self.bootstrap = [(h, int(p)) for h, p in
                          (b.strip().rsplit(":", 1) for b in bootstrap.split(","))]
        self.timeout = timeout
        self.ssl_context = ssl_context
        self._conns: dict[tuple[str, int], BrokerConnection] = {}

    async def __aenter__(self) -> "AdminClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    def _conn(self, host: str, port: int) -> BrokerConnection:
        key = (host, port)
        if key not in self._conns:
            self._conns[key] = BrokerConnection(host, port, timeout=self.timeout,
                                                ssl_context=self.ssl_context)
        return self._conns[key]

    async def _any(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return await self._conn(host, port).request(api_key, version, body)
            except Exception as exc:  # try the next bootstrap server
                last = exc
        assert last is not None
        raise last

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the first bootstrap server that answers (client/security.py)."""
        return await self._any(api_key, version, body)

    # -- cluster --------------------------------------------------------------------

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

    async def _cluster(self, topics: list[str] | None = None) -> _Cluster:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = await self._any(METADATA, 7, body)
        cluster = _Cluster({b.node_id: (b.host, b.port) for b in resp.brokers})
        for t in resp.topics:
            for p in t.partitions:
                cluster.leaders[(t.name, p.partition_index)] = p.leader_id
        return cluster

    # -- brokers (what a scale-down needs) -------------------------------------------

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
        except _UNREACHABLE:
            return None
        raise_for(resp.error_code, f"describe log dirs at {host}:{port}")
        return _log_dir_sizes(resp.results)

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

    async def alter_broker_configs(self, broker: int | None, set_configs: Mapping[str, str],
                                   delete: Iterable[str] = ()) -> None:
        """IncrementalAlterConfigs on a BROKER resource: SET each of `set_configs`, DELETE
        each of `delete`, for node `broker` or, when None, the cluster-wide default.

        Any broker takes the request (it is relayed to the active controller, as KRaft
        Kafka forwards it), so a node id that is down can still be configured. The change
        is committed to the metadata log; each broker applies it when it replays that, so
        a describe right afterwards may still show the old value for a moment. A key that
        cannot change without a restart is refused with InvalidRequest.
        """
        name = _broker_resource_name(broker)
        configs = [{"name": k, "config_operation": SET_CONFIG, "value": v}
                   for k, v in set_configs.items()]
        configs += [{"name": k, "config_operation": DELETE_CONFIG, "value": None}
                    for k in delete]
        resp = await self._any(INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": name,
                           "configs": configs}],
            "validate_only": False})
        for r in resp.responses:
            raise_for(r.error_code, f"alter configs of broker {name!r}", r.error_message)

    async def broker_config_overrides(self, broker: int | None) -> dict[str, str]:
        """The dynamic configs set on node `broker` itself (config source
        DYNAMIC_BROKER_CONFIG), or, when None, the cluster-wide defaults
        (DYNAMIC_DEFAULT_BROKER_CONFIG); static and default values are left out.

        A node describes only its own configs, so a node id is asked of that broker
        directly: BrokerNotAvailable when Metadata does not list it as live.
        """
        name = _broker_resource_name(broker)
        body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": name,
                               "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        if broker is None:
            resp = await self._any(DESCRIBE_CONFIGS, 4, body)
            source = DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            cluster = await self._cluster([])
            if broker not in cluster.brokers:
                raise BrokerNotAvailable(f"broker {broker} is not live (Metadata lists "
                                         f"{sorted(cluster.brokers)})")
            resp = await self._conn(*cluster.brokers[broker]).request(DESCRIBE_CONFIGS, 4,
                                                                      body)
            source = DYNAMIC_BROKER_CONFIG
        r = resp.results[0]
        raise_for(r.error_code, f"describe configs of broker {name!r}", r.error_message)
        return {c.name: c.value for c in r.configs
                if int(c.config_source) == source and c.value is not None}

    async def isr(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """(topic, partition) -> in-sync replicas, for every topic, as Metadata reports."""
        return {tp: isr for tp, (_, isr) in (await self._partition_states(None)).items()}

    async def under_replicated(self) -> list[tuple[str, int]]:
        """The partitions, of every topic, whose ISR is shorter than their replica list."""
        states = await self._partition_states(None)
        return short_isr({tp: rs for tp, (rs, _) in states.items()},
                         {tp: isr for tp, (_, isr) in states.items()})

    async def _partition_states(self, topics: list[str] | None
                                ) -> dict[tuple[str, int], tuple[tuple[int, ...],
                                                                 tuple[int, ...]]]:
        """(topic, partition) -> (replicas, isr) by Metadata v12 (all topics when None)."""
        resp = await self._any(METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return {(t.name, p.partition_index): (tuple(p.replica_nodes), tuple(p.isr_nodes))
                for t in resp.topics if int(t.error_code) == 0 for p in t.partitions}

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

    # -- groups ---------------------------------------------------------------------

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

    # -- topics (the operator's Topic handling) --------------------------------------

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

    async def topic_config_overrides(self, name: str) -> dict[str, str]:
        """The topic's own configs (DescribeConfigs source DYNAMIC_TOPIC_CONFIG), no defaults."""
        resp = await self._any(DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        r = resp.results[0]
        raise_for(r.error_code, f"describe configs of {name}")
        return {c.name: c.value for c in r.configs
                if int(c.config_source) == DYNAMIC_TOPIC_CONFIG and c.value is not None}

    async def create_partitions(self, name: str, total: int) -> None:
        resp = await self._any(CREATE_PARTITIONS, 3, {
            "topics": [{"name": name, "count": total, "assignments": None}],
            "timeout_ms": 30000, "validate_only": False})
        for r in resp.results:
            raise_for(r.error_code, f"create partitions of {r.name}")

    async def alter_topic_configs(self, name: str, set_configs: dict[str, str],
                                  delete: list[str] | tuple[str, ...] = ()) -> None:
        """IncrementalAlterConfigs: SET each of `set_configs`, DELETE each of `delete`."""
        configs = [{"name": k, "config_operation": SET_CONFIG, "value": v}
                   for k, v in set_configs.items()]
        configs += [{"name": k, "config_operation": DELETE_CONFIG, "value": None}
                    for k in delete]
        resp = await self._any(INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                           "configs": configs}],
            "validate_only": False})
        for r in resp.responses:
            raise_for(r.error_code, f"alter configs of {name}")

    async def delete_topic(self, name: str) -> bool:
        """True when deleted, False when there was no such topic."""
        resp = await self._any(DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": 30000})
        r = resp.responses[0]
        if int(r.error_code) == 3:
            return False
        raise_for(r.error_code, f"delete topic {name}")
        return True
