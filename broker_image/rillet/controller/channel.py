"""The one path from this broker to the active controller (Kafka's
NodeToControllerChannelManager).

A call is local when this node leads the quorum (the controller then waits, bounded, until it
is active), an RPC to the quorum leader's controller listener otherwise. One leader lookup
(`leader`), one pool of connections (by address), for every caller: relayed client requests
(forwarding.py), registration and heartbeats (lifecycle.py), AlterPartition (replication)
and topic creation (auto-creation, the group coordinator, CreateTopics handled here).
Each new connection first asks ApiVersions; every request on it goes at the highest version
both sides serve (controller/versions.py), as Kafka's NodeApiVersions does.

Owned by the broker; event loop only.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from ..client.connection import KafkaClientError, open_stream, raise_for
from ..metadata.view import MetadataView
from ..protocol import errors
from ..protocol.build import build
from ..protocol.codec import (FramingError, decode_response, encode_request, request_schema,
                              response_size)
from ..raft.node import RaftNode, VoterAddress
from . import remote
from .controller import ACTIVE_WAIT_S, BrokerState, Controller
from .isr import IsrAnswer, IsrChange
from .topics import TopicResult, TopicSpec
from .versions import API_VERSIONS, API_VERSIONS_VERSION, ApiRanges, choose_version

INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS = 22, (4, 4)

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


@dataclass
class _Connection:
    """One connection to a controller and what that controller said it serves on it."""
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    versions: ApiRanges


@dataclass(frozen=True)
class Registration:
    """What a broker registers with (BrokerRegistration's fields)."""
    node_id: int
    incarnation: uuid.UUID
    # (LISTENER, host, port, security protocol) of each broker listener, inter-broker first.
    listeners: tuple[tuple[str, str, int, str], ...]
    rack: str | None
    log_dirs: tuple[uuid.UUID, ...] = ()   # directory ids of its online log dirs (KIP-858)


class ControllerChannel:
    def __init__(self, node_id: int, cluster_id: str, raft: RaftNode, controller: Controller,
                 view: MetadataView, ssl_context: ssl.SSLContext | None,
                 request_timeout_s: float) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._raft = raft
        self._controller = controller
        self._view = view
        self._ssl = ssl_context
        self._timeout = request_timeout_s
        self._client_id = f"rillet-broker-{node_id}"
        # Idle connections by address, each with the versions its controller serves
        # (controller/versions.py): a request goes at the highest version both sides know.
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._ids = itertools.count(1)

    # -- where the controller is -------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """This node leads the quorum: its own controller decides."""
        return self._raft.is_leader

    def leader(self) -> VoterAddress | None:
        """The active controller's controller listener, when it is known and not this node."""
        leader = self._raft.leader_id
        if leader is None or leader == self.node_id:
            return None
        return self._raft.voters.get(leader)

    async def wait_for_leader(self, timeout: float) -> bool:
        """True once some quorum leader is known (maybe this node), False at timeout."""
        raft = self._raft
        return await raft.wait_for(lambda: raft.leader_id is not None, timeout)

    # -- transport -----------------------------------------------------------------------

    async def exchange(self, frame: bytes) -> bytes:
        """A request frame (no size prefix) to the active controller, as it is (a relayed
        client request keeps the client's version); its size-prefixed answer, under the
        caller's correlation id. NotController when none is known; OSError,
        IncompleteReadError, FramingError or a KafkaError (ApiVersions refused on a new
        connection) when the exchange fails."""
        address, conn = await self._connection()
        return await self._exchange_on(address, conn, frame)

    async def request(self, api_key: int, versions: tuple[int, int],
                      body: dict[str, Any]) -> Any:
        """One RPC to the active controller, built from plain values at the highest version
        in `versions` that the controller serves too (the body's fields a lower version
        lacks are left out); its decoded answer. NotController when none is known,
        UnsupportedVersion when no version is common, KafkaClientError when the exchange
        fails."""
        try:
            return await asyncio.wait_for(self._request(api_key, versions, body),
                                          self._timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                FramingError) as exc:
            raise KafkaClientError(f"controller: {exc!r}") from exc

    async def _request(self, api_key: int, versions: tuple[int, int],
                       body: dict[str, Any]) -> Any:
        address, conn = await self._connection()
        try:
            version = choose_version(api_key, versions, conn.versions,
                                     f"controller at {address[0]}:{address[1]}")
        except errors.KafkaError:
            self._idle.setdefault(address, []).append(conn)   # the connection is fine
            raise
        frame = encode_request(api_key, version, 0, self._client_id,
                               build(request_schema(api_key, version), body))
        answer = await self._exchange_on(address, conn, frame[4:])
        return decode_response(api_key, version, answer[4:])[1]

    async def _connection(self) -> tuple[tuple[str, int], _Connection]:
        """The active controller's address and a connection to it: an idle one, else a new
        one whose ApiVersions answer has been read."""
        voter = self.leader()
        if voter is None:
            raise errors.NotController("no active controller known yet")
        address = (voter.host, voter.port)
        return address, self._take(address) or await self._open(address)

    async def _open(self, address: tuple[str, int]) -> _Connection:
        reader, writer = await open_stream(*address, self._ssl)
        try:
            correlation = next(self._ids) & 0x7FFFFFFF
            writer.write(encode_request(
                API_VERSIONS, API_VERSIONS_VERSION, correlation, self._client_id,
                build(request_schema(API_VERSIONS, API_VERSIONS_VERSION), {})))
            await writer.drain()
            _, resp = decode_response(API_VERSIONS, API_VERSIONS_VERSION,
                                      await _read_answer(reader, correlation))
            conn = _Connection(reader, writer, ApiRanges.from_response(resp))
        except BaseException:
            writer.close()
            raise
        log.debug("controller at %s:%d serves %s", *address, dict(conn.versions.ranges))
        return conn

    async def _exchange_on(self, address: tuple[str, int], conn: _Connection,
                           frame: bytes) -> bytes:
        """`frame` over `conn`, back to the idle pool after a whole answer, closed
        otherwise."""
        ok = False
        try:
            ours = next(self._ids) & 0x7FFFFFFF
            theirs = frame[4:8]
            conn.writer.write(_SIZE.pack(len(frame)) + frame[:4] + _CORRELATION.pack(ours)
                              + frame[8:])
            await conn.writer.drain()
            body = await _read_answer(conn.reader, ours)
            ok = True
            return _SIZE.pack(len(body)) + theirs + body[4:]
        finally:
            if ok:
                self._idle.setdefault(address, []).append(conn)
            else:
                conn.writer.close()

    def _take(self, address: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(address)
        while idle:
            conn = idle.pop()
            if not conn.writer.is_closing():
                return conn
        return None

    async def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.writer.close()
        self._idle.clear()

    # -- the calls -----------------------------------------------------------------------

    async def register_broker(self, r: Registration) -> int:
        """BrokerRegistration: the broker epoch granted."""
        endpoints = tuple((name, host, port) for name, host, port, _ in r.listeners)
        if self.is_local:
            _, host, port = endpoints[0]
            return await self._controller.register_broker(
                r.node_id, host, port, r.rack, str(r.incarnation), endpoints, r.log_dirs)
        body = {"broker_id": r.node_id, "cluster_id": self.cluster_id,
                "incarnation_id": r.incarnation,
                "listeners": [{"name": name, "host": host, "port": port,
                               "security_protocol": remote.PROTOCOL_IDS[protocol]}
                              for name, host, port, protocol in r.listeners],
                "features": [], "rack": r.rack,
                # Left out below v2 (a controller of an older rillet, met mid-upgrade):
                # AssignReplicasToDirs tells it the same dirs.
                "log_dirs": list(r.log_dirs)}
        response = await self.request(remote.BROKER_REGISTRATION,
                                      remote.BROKER_REGISTRATION_VERSIONS, body)
        raise_for(response.error_code, "broker registration")
        return int(response.broker_epoch)

    async def broker_heartbeat(self, node_id: int, broker_epoch: int, metadata_offset: int,
                               want_shutdown: bool,
                               offline_dirs: frozenset[uuid.UUID] = frozenset()
                               ) -> BrokerState:
        """`offline_dirs`: the directory ids of this broker's offline log dirs (sent at
        v1+; a controller serving only v0 learns of them by AssignReplicasToDirs)."""
        if self.is_local:
            return await self._controller.broker_heartbeat(
                node_id, broker_epoch, metadata_offset, want_shutdown, offline_dirs)
        response = await self.request(remote.BROKER_HEARTBEAT,
                                      remote.BROKER_HEARTBEAT_VERSIONS, {
            "broker_id": node_id, "broker_epoch": broker_epoch,
            "current_metadata_offset": metadata_offset, "want_fence": False,
            "want_shut_down": want_shutdown, "offline_log_dirs": sorted(offline_dirs)})
        return remote.heartbeat_state(response)

    async def assign_replicas_to_dirs(self, node_id: int, broker_epoch: int,
                                      assignments: Mapping[tuple[str, int], uuid.UUID]
                                      ) -> dict[tuple[str, int], errors.KafkaError | None]:
        """This broker's replicas are in these log dirs (AssignReplicasToDirs; LOST: a
        failed dir); the controller's answer per partition. Partitions of topics this node
        does not know (deleted meanwhile) are left out."""
        if self.is_local:
            return await self._controller.assign_replicas_to_dirs(node_id, broker_epoch,
                                                                  assignments)
        image = self._view.image
        topic_ids = {t: image.topics[t].topic_id for t, _ in assignments if t in image.topics}
        known = {tp: d for tp, d in assignments.items() if tp[0] in topic_ids}
        if not known:
            return {}
        response = await self.request(remote.ASSIGN_REPLICAS_TO_DIRS,
                                      remote.ASSIGN_REPLICAS_TO_DIRS_VERSIONS,
                                      remote.assignments_body(node_id, broker_epoch, known,
                                                              topic_ids))
        return remote.assignments_answers(response, topic_ids)

    async def next_producer_id(self) -> int:
        """A producer id from the controller's blocks (the transaction coordinator's ids):
        an idempotent InitProducerId, which the active controller answers itself."""
        if self.is_local:
            return await self._controller.next_producer_id()
        response = await self.request(INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS, {
            "transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1})
        raise_for(response.error_code, "producer id allocation")
        return int(response.producer_id)

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False
                            ) -> list[TopicResult]:
        """Create topics (internal callers and CreateTopics handled here). Those created
        elsewhere are awaited (bounded) in this node's image: callers go on to use them."""
        if self.is_local:
            return await self._controller.create_topics(specs, validate_only)
        if not await self.wait_for_leader(ACTIVE_WAIT_S):
            return [TopicResult(s.name, error=errors.NotController("no active controller"))
                    for s in specs]
        if self.is_local:
            return await self._controller.create_topics(specs, validate_only)
        try:
            results = remote.topic_results(await self.request(
                remote.CREATE_TOPICS, remote.CREATE_TOPICS_VERSIONS,
                remote.create_topics_body(specs, validate_only)))
        except Exception as exc:
            return [TopicResult(s.name, error=errors.NotController(
                f"controller unreachable: {exc}")) for s in specs]
        # A topic that already exists there (another node auto-created it a moment ago) is
        # on its way here too.
        created = {r.name for r in results
                   if r.error is None or isinstance(r.error, errors.TopicAlreadyExists)}
        await self._view.wait_until(lambda image: created <= image.topics.keys(),
                                    ACTIVE_WAIT_S)
        return results

    async def alter_partitions(self, leader_id: int, changes: list[IsrChange]
                               ) -> list[IsrAnswer]:
        """A leader's ISR changes, all in one AlterPartition; one answer per change, in
        order. Raises (NotController, KafkaClientError) when the request as a whole got no
        answer: then nothing is known of any change."""
        if self.is_local:
            return await self._controller.alter_partitions(leader_id, changes)
        topics = self._view.image.topics
        topic_ids = {name: topics[name].topic_id for name in {c.topic for c in changes}
                     if name in topics}
        # A topic this node does not know yet cannot be named by id: asked again later.
        # (Answers are made per change only for those: a batch may carry thousands.)
        answers: list[IsrAnswer] = [None] * len(changes)
        known = []
        for i, c in enumerate(changes):
            if c.topic in topic_ids:
                known.append(i)
            else:
                answers[i] = errors.NotController(f"topic {c.topic!r} is not known here yet")
        if known:
            sent = [changes[i] for i in known]
            response = await self.request(
                remote.ALTER_PARTITION, remote.ALTER_PARTITION_VERSIONS,
                remote.alter_partition_body(leader_id, sent, topic_ids))
            for i, answer in zip(known, remote.alter_partition_answers(response, sent,
                                                                       topic_ids)):
                answers[i] = answer
        return answers


async def _read_answer(reader: asyncio.StreamReader, correlation: int) -> bytes:
    """One size-prefixed answer from the controller: its body, correlation id first.
    OSError when it answers another request (the connection is out of step and must close)."""
    size = response_size(await reader.readexactly(4))
    body = await reader.readexactly(size)
    if _CORRELATION.unpack_from(body, 0)[0] != correlation:
        raise OSError("controller's response has another correlation id")
    return body
