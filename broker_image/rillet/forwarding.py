"""Relaying controller-bound requests (CreateTopics, configs, ...) to the active controller.

Kafka's brokers forward such requests (KIP-590) so clients may send them to
any broker. rillet relays the client's frame unchanged, but for its
correlation id, to the active controller's controller listener, and hands the
answer back: the controller decides exactly as if the client had asked it.
When no controller can be reached the request is handled here, where the
controller answers NOT_CONTROLLER and the client retries.
Frames travel on the controller channel (controller/channel.py): its leader lookup, its
connections.

With an authorizer on, the controller must judge the request as the client's principal, not
as this broker: the frame then travels inside an Envelope (key 58) carrying the principal
and client host, as Kafka's brokers forward (KIP-590). The controller listener is trusted
with that claim, so it belongs on a network only brokers reach (or behind mutual TLS).
"""
from __future__ import annotations

import asyncio
import logging
import struct

from .controller.channel import ControllerChannel
from .protocol import errors
from .protocol.build import build
from .protocol.codec import FramingError, decode_response, encode_request, request_schema
from .security.session import Session

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
LEADER_WAIT_S = 5.0
EXCHANGE_TIMEOUT_S = 60.0
ENVELOPE = 58


class ControllerForwarder:
    """Relays through the controller channel; `envelope`: with an authorizer on, the
    client's principal travels with its frame (see above)."""

    def __init__(self, node_id: int, channel: ControllerChannel, envelope: bool) -> None:
        self.node_id = node_id
        self._channel = channel
        self._envelope = envelope

    async def relay(self, frame: bytes, session: Session | None = None) -> bytes | None:
        """The active controller's response frame, or None to handle the request here."""
        channel = self._channel
        if channel.is_local:
            return None
        if not await channel.wait_for_leader(LEADER_WAIT_S):
            return None
        if channel.leader() is None:
            return None
        try:
            if not self._envelope:
                return await asyncio.wait_for(channel.exchange(frame), EXCHANGE_TIMEOUT_S)
            return await asyncio.wait_for(self._enveloped(frame, session or Session()),
                                          EXCHANGE_TIMEOUT_S)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                FramingError, errors.KafkaError) as exc:   # NotController; ApiVersions refused
            log.info("could not relay a request to the controller: %r", exc)
            return None

    async def _enveloped(self, frame: bytes, session: Session) -> bytes | None:
        """The client's frame in an Envelope; the inner response frame, or None (handle
        here) when the controller refused the envelope itself."""
        envelope = build(request_schema(ENVELOPE, 0), {
            "request_data": frame, "request_principal": session.principal.encode(),
            "client_host_address": session.client_host.encode()})
        wrapped = encode_request(ENVELOPE, 0, 0, f"rillet-broker-{self.node_id}", envelope)
        answer = await self._channel.exchange(wrapped[4:])
        _, response = decode_response(ENVELOPE, 0, answer[4:])
        if response.error_code or response.response_data is None:
            log.info("controller refused a forwarded request: error %d", response.error_code)
            return None
        data = bytes(response.response_data)
        return _SIZE.pack(len(data)) + data
