"""Relaying controller-bound requests (CreateTopics, configs, ...) to the active controller.

Kafka's brokers forward such requests (KIP-590) so clients may send them to
any broker. rillet relays the client's frame unchanged, but for its
correlation id, to the active controller's controller listener, and hands the
answer back: the controller decides exactly as if the client had asked it.
When no controller can be reached the request is handled here, where the
controller answers NOT_CONTROLLER and the client retries.

With an authorizer on, the controller must judge the request as the client's principal, not
as this broker: the frame then travels inside an Envelope (key 58) carrying the principal
and client host, as Kafka's brokers forward (KIP-590). The controller listener is trusted
with that claim, so it belongs on a network only brokers reach (or behind mutual TLS).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from typing import TYPE_CHECKING

from .client.connection import open_stream
from .protocol.build import build
from .protocol.codec import (FramingError, decode_response, encode_request, request_schema,
                             response_size)
from .security.session import Session

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
LEADER_WAIT_S = 5.0
EXCHANGE_TIMEOUT_S = 60.0
ENVELOPE = 58

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class ControllerForwarder:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self._idle: dict[tuple[str, int], list[Stream]] = {}
        self._ids = itertools.count(1)

    async def relay(self, frame: bytes, session: Session | None = None) -> bytes | None:
        """The active controller's response frame, or None to handle the request here."""
        raft = self.broker.raft
        if raft is None or raft.is_leader:
            return None
        if not await raft.wait_for(lambda: raft.leader_id is not None, LEADER_WAIT_S):
            return None
        leader = raft.leader_id
        if leader is None or leader == self.broker.node_id or leader not in raft.voters:
            return None
        voter = raft.voters[leader]
        try:
            if getattr(self.broker, "authorizer", None) is None:
                return await asyncio.wait_for(self._exchange((voter.host, voter.port), frame),
                                              EXCHANGE_TIMEOUT_S)
            return await asyncio.wait_for(
                self._enveloped((voter.host, voter.port), frame, session or Session()),
                EXCHANGE_TIMEOUT_S)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                FramingError) as exc:
            log.info("could not relay a request to controller %d: %r", leader, exc)
            return None

    async def _enveloped(self, address: tuple[str, int], frame: bytes,
                         session: Session) -> bytes | None:
        """The client's frame in an Envelope; the inner response frame, or None (handle
        here) when the controller refused the envelope itself."""
        envelope = build(request_schema(ENVELOPE, 0), {
            "request_data": frame, "request_principal": session.principal.encode(),
            "client_host_address": session.client_host.encode()})
        wrapped = encode_request(ENVELOPE, 0, 0, f"rillet-broker-{self.broker.node_id}",
                                 envelope)
        answer = await self._exchange(address, wrapped[4:])
        _, response = decode_response(ENVELOPE, 0, answer[4:])
        if response.error_code or response.response_data is None:
            log.info("controller refused a forwarded request: error %d", response.error_code)
            return None
        data = bytes(response.response_data)
        return _SIZE.pack(len(data)) + data

    async def _exchange(self, address: tuple[str, int], frame: bytes) -> bytes:
        stream = self._take(address) or await open_stream(
            *address, self.broker.outbound_tls.controller)
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
                raise OSError("relayed response has another correlation id")
            ok = True
            return _SIZE.pack(size) + theirs + body[4:]
        finally:
            if ok:
                self._idle.setdefault(address, []).append(stream)
            else:
                writer.close()

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
