"""SaslAuthenticate (key 36), v0-2: one step of the exchange SaslHandshake started.

The same step serves the bare tokens that follow a v0 SaslHandshake (``raw_token``): there
a token is a size-prefixed frame with no request header, answered by a size-prefixed token
(an empty one ends PLAIN), as Kafka 3.x serves kafka-python 2.0 and older Sarama.

A failed authentication is answered SASL_AUTHENTICATION_FAILED after
connection.failed.authentication.delay.ms (a guesser gets one try per delay and connection)
and the connection is closed, as Kafka does; a bare token has no room for an error, so
there the connection is only closed after the delay. The log line names the listener, peer
and mechanism, never the password. Re-authentication (KIP-368) is not offered: session
lifetime 0.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from ..protocol import errors
from ..security.session import AuthenticationFailed
from ..security.session import Session
from .registry import BrokerServices, RequestContext, api

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")


async def _step(broker: BrokerServices, session: Session, peer: str, connection_id: int,
                token: bytes) -> bytes:
    """Feed one client token to the session's exchange; the server's answer. Raises
    AuthenticationFailed (logged, counted, after the failed-authentication delay)."""
    exchange = session.exchange
    try:
        answer = exchange.step(token)
    except AuthenticationFailed as exc:
        log.warning("authentication failed on listener %s from %s (connection %d, %s%s): %s",
                    session.listener_name, peer, connection_id, exchange.mechanism,
                    ", SaslHandshake v0" if session.raw_tokens else "", exc)
        session.close_after_response = True
        metrics = broker.metrics
        if metrics is not None:
            metrics.authentication_failed(session.listener_name)
        await asyncio.sleep(broker.config["connection.failed.authentication.delay.ms"] / 1000)
        raise
    if exchange.principal is not None:
        session.principal = exchange.principal
        session.authenticated = True
        session.exchange = None
        log.debug("connection %d from %s authenticated as %s (%s)", connection_id, peer,
                  session.principal, exchange.mechanism)
    return answer


async def raw_token(broker: BrokerServices, session: Session, peer: str, connection_id: int,
                    token: bytes) -> bytes | None:
    """One bare SASL token after a v0 SaslHandshake: the size-prefixed answer, or None
    (and the connection closed) when authentication failed."""
    try:
        answer = await _step(broker, session, peer, connection_id, token)
    except AuthenticationFailed:
        return None
    return _SIZE.pack(len(answer)) + answer


@api(key=36, versions=(0, 2))
async def sasl_authenticate(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    if session.exchange is None or session.authenticated:
        session.close_after_response = True
        return ctx.response({"error_code": errors.IllegalSaslState.code,
                             "error_message": "SaslAuthenticate without a SaslHandshake first",
                             "auth_bytes": b"", "session_lifetime": 0})
    mechanism = session.exchange.mechanism
    try:
        answer = await _step(ctx.broker, session, ctx.peer, ctx.connection_id,
                             bytes(req.auth_bytes))
    except AuthenticationFailed:
        return ctx.response({
            "error_code": errors.SaslAuthenticationFailed.code,
            "error_message": f"Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {mechanism}",
            "auth_bytes": b"", "session_lifetime": 0})
    return ctx.response({"error_code": 0, "error_message": None, "auth_bytes": answer,
                         "session_lifetime": 0})
