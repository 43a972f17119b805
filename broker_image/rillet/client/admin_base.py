"""The admin client's connections and the requests every API family shares.

Fixed, modern request versions that rillet serves (this client talks to rillet; it does not
negotiate down for old brokers). Each family of admin APIs is its own module (admin_cluster,
admin_configs, admin_topics, admin_groups); admin.py puts them together as AdminClient.
"""
from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any, Self

from .connection import BrokerConnection, KafkaClientError

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
UNREACHABLE = (OSError, asyncio.TimeoutError, KafkaClientError)
SET_CONFIG, DELETE_CONFIG = 0, 1
LATEST, EARLIEST = -1, -2


@dataclass
class ClusterView:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)


class AdminBase:
    """Connections to the bootstrap servers and to every broker Metadata names."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """`ssl_context`: for an SSL listener (with the client's certificate for mTLS); every
        broker is then dialled with it, as the listener's advertised addresses are."""
        self.bootstrap = [(h, int(p)) for h, p in
                          (b.strip().rsplit(":", 1) for b in bootstrap.split(","))]
        self.timeout = timeout
        self.ssl_context = ssl_context
        self._conns: dict[tuple[str, int], BrokerConnection] = {}

    async def __aenter__(self) -> Self:
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

    async def _cluster(self, topics: list[str] | None = None) -> ClusterView:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = await self._any(METADATA, 7, body)
        cluster = ClusterView({b.node_id: (b.host, b.port) for b in resp.brokers})
        for t in resp.topics:
            for p in t.partitions:
                cluster.leaders[(t.name, p.partition_index)] = p.leader_id
        return cluster


    async def _partition_states(self, topics: list[str] | None
                                ) -> dict[tuple[str, int], tuple[tuple[int, ...],
                                                                 tuple[int, ...]]]:
        """(topic, partition) -> (replicas, isr) by Metadata v12 (all topics when None)."""
        resp = await self._any(METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return {(t.name, p.partition_index): (tuple(p.replica_nodes), tuple(p.isr_nodes))
                for t in resp.topics if int(t.error_code) == 0 for p in t.partitions}
