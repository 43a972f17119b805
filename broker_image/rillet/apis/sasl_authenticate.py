"""SaslAuthenticate (key 36), v0-2: one step of the exchange SaslHandshake started.

A failed authentication is answered SASL_AUTHENTICATION_FAILED after
connection.failed.authentication.delay.ms (a guesser gets one try per delay and connection)
and the connection is closed, as Kafka does; the log line names the listener, peer and
mechanism, never the password. Re-authentication (KIP-368) is not offered: session
lifetime 0.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..protocol import errors
from ..security.sasl import AuthenticationFailed
from .registry import RequestContext, api

log = logging.getLogger(__name__)


@api(key=36, versions=(0, 2))
async def sasl_authenticate(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    exchange = session.exchange
    if exchange is None or session.authenticated:
        session.close_after_response = True
        return ctx.response({"error_code": errors.IllegalSaslState.code,
                             "error_message": "SaslAuthenticate without a SaslHandshake first",
                             "auth_bytes": b"", "session_lifetime": 0})
    try:
        answer = exchange.step(bytes(req.auth_bytes))
    except AuthenticationFailed as exc:
        log.warning("authentication failed on listener %s from %s (connection %d, %s): %s",
                    session.listener_name, ctx.peer, ctx.connection_id, exchange.mechanism,
                    exc)
        session.close_after_response = True
        metrics = getattr(ctx.broker, "metrics", None)
        if metrics is not None:
            metrics.authentication_failed(session.listener_name)
        await asyncio.sleep(ctx.broker.config["connection.failed.authentication.delay.ms"]
                            / 1000)
        return ctx.response({
            "error_code": errors.SaslAuthenticationFailed.code,
            "error_message": f"Authentication failed during authentication due to invalid "
                             f"credentials with SASL mechanism {exchange.mechanism}",
            "auth_bytes": b"", "session_lifetime": 0})
    if exchange.principal is not None:
        session.principal = exchange.principal
        session.authenticated = True
        session.exchange = None
        log.debug("connection %d from %s authenticated as %s (%s)", ctx.connection_id,
                  ctx.peer, session.principal, exchange.mechanism)
    return ctx.response({"error_code": 0, "error_message": None, "auth_bytes": answer,
                         "session_lifetime": 0})
