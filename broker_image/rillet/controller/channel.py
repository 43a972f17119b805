"""The one path from this broker to the active controller (Kafka's
NodeToControllerChannelManager).

A call is local when this node leads the quorum (the controller then waits, bounded, until it
is active), an RPC to the quorum leader's controller listener otherwise. One leader lookup
(`leader`), one pool of connections (by address), for every caller: relayed client requests
(forwarding.py), registration and heartbeats (lifecycle.py), AlterPartition (replication)
and topic creation (auto-creation, the group coordinator, CreateTopics handled here).

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

INIT_PRODUCER_ID = 22

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


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
        self._idle: dict[tuple[str, int], list[Stream]] = {}
        self._ids = itertools.count(1)
        # Controllers (node ids) asked with v0 of BrokerRegistration and BrokerHeartbeat:
        # their v2/v1 carry KIP-858's log dirs, and an older rillet, met while an upgrade
        # rolls node by node, closes the connection on them. A failed exchange with a newer
        # version puts that controller here (a network fault too: it then only misses the
        # log dirs, which AssignReplicasToDirs carries anyway).
        self._v0_only: set[int] = set()

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
        """A request frame (no size prefix) to the active controller; its size-prefixed
        answer, under the caller's correlation id. NotController when none is known;
        OSError, IncompleteReadError or FramingError when the exchange fails."""
        voter = self.leader()
        if voter is None:
            raise errors.NotController("no active controller known yet")
        address = (voter.host, voter.port)
        stream = self._take(address) or await open_stream(*address, self._ssl)
        reader, writer = stream
        ok = False
        try:
            ours = next(self._ids) & 0x7FFFFFFF
            theirs = frame[4:8]
            writer.write(_SIZE.pack(len(frame)) + frame[:4] + _CORRELATION.pack(ours) + frame[8:])
            await writer.drain()
            size = response_size(await reader.readexactly(4))
            body = await reader.readexactly(size)
            if _CORRELATION.unpack_from(body, 0)[0] != ours:
                raise OSError("controller's response has another correlation id")
            ok = True
            return _SIZE.pack(size) + theirs + body[4:]
        finally:
            if ok:
                self._idle.setdefault(address, []).append(stream)
            else:
                writer.close()

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One RPC to the active controller, built from plain values; its decoded answer.
        NotController when none is known; KafkaClientError when the exchange fails."""
        frame = encode_request(api_key, version, 0, self._client_id,
                               build(request_schema(api_key, version), body))
        try:
            answer = await asyncio.wait_for(self.exchange(frame[4:]), self._timeout)
            return decode_response(api_key, version, answer[4:])[1]
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                FramingError) as exc:
            raise KafkaClientError(f"controller: {exc!r}") from exc

    def _take(self, address: tuple[str, int]) -> Stream | None:
        idle = self._idle.get(address)
        while idle:
            stream = idle.pop()
            if not stream[1].is_closing():
                return stream
        return None

    async def close(self) -> None:
        for streams in self._idle.values():
            for _, writer in streams:
                writer.close()
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
                "features": [], "rack": r.rack}
        response = await self._lifecycle_request(remote.BROKER_REGISTRATION, 2, body,
                                                 {"log_dirs": list(r.log_dirs)})
        raise_for(response.error_code, "broker registration")
        return int(response.broker_epoch)

    async def broker_heartbeat(self, node_id: int, broker_epoch: int, metadata_offset: int,
                               want_shutdown: bool,
                               offline_dirs: frozenset[uuid.UUID] = frozenset()
                               ) -> BrokerState:
        """`offline_dirs`: the directory ids of this broker's offline log dirs."""
        if self.is_local:
            return await self._controller.broker_heartbeat(
                node_id, broker_epoch, metadata_offset, want_shutdown, offline_dirs)
        response = await self._lifecycle_request(remote.BROKER_HEARTBEAT, 1, {
            "broker_id": node_id, "broker_epoch": broker_epoch,
            "current_metadata_offset": metadata_offset, "want_fence": False,
            "want_shut_down": want_shutdown}, {"offline_log_dirs": sorted(offline_dirs)})
        return remote.heartbeat_state(response)

    async def _lifecycle_request(self, api_key: int, version: int, body: dict[str, Any],
                                 log_dirs: dict[str, Any]) -> Any:
        """A registration or heartbeat: at `version` with its `log_dirs` fields, or at v0
        without them to a controller that failed such an exchange (see __init__)."""
        leader = self._raft.leader_id
        if leader in self._v0_only:
            return await self.request(api_key, 0, body)
        try:
            return await self.request(api_key, version, {**body, **log_dirs})
        except KafkaClientError:
            if leader is not None:
                log.info("controller %s: api %d v%d failed; asking it with v0 from now on",
                         leader, api_key, version)
                self._v0_only.add(leader)
            raise

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
        response = await self.request(remote.ASSIGN_REPLICAS_TO_DIRS, 0,
                                      remote.assignments_body(node_id, broker_epoch, known,
                                                              topic_ids))
        return remote.assignments_answers(response, topic_ids)

    async def next_producer_id(self) -> int:
        """A producer id from the controller's blocks (the transaction coordinator's ids):
        an idempotent InitProducerId, which the active controller answers itself."""
        if self.is_local:
            return await self._controller.next_producer_id()
        response = await self.request(INIT_PRODUCER_ID, 4, {
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
                remote.CREATE_TOPICS, remote.CREATE_TOPICS_VERSION,
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
                remote.ALTER_PARTITION, remote.ALTER_PARTITION_VERSION,
                remote.alter_partition_body(leader_id, sent, topic_ids))
            for i, answer in zip(known, remote.alter_partition_answers(response, sent,
                                                                       topic_ids)):
                answers[i] = answer
        return answers
