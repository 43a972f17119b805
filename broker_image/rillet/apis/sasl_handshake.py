"""SaslHandshake (key 17), v0-1: the client names its SASL mechanism.

Only on a SASL listener and only once per connection, as Kafka 3.x serves it (Kafka 4
dropped v0, KIP-896; rillet keeps it for the clients that still send it).
v0: the SASL tokens then follow as bare size-prefixed frames, no SaslAuthenticate framing
    (kafka-python 2.0, older Sarama). Older librdkafka also needs v0 advertised (2.0.2,
    Debian 12's, checked; 2.16.1 does not): it checks that the range overlaps 0-0 before
    it uses SASL at all, then sends v1.
v1: the tokens follow in SaslAuthenticate requests.
A refused handshake (not a SASL listener, a second handshake, a mechanism not enabled) is
logged with the mechanism, version and peer.
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol import errors
from ..defs.sasl import PLAIN, enabled_mechanisms, parse_jaas_users
from ..on_demand import sasl_exchange
from .registry import RequestContext, api

log = logging.getLogger(__name__)


def _exchange(ctx: RequestContext, mechanism: str) -> Any:
    settings = ctx.session.settings
    return sasl_exchange(mechanism, lambda: parse_jaas_users(settings.jaas(PLAIN) or ""),
                         ctx.broker.scram_credential)


def _refuse(ctx: RequestContext, mechanism: str, error: type[errors.KafkaError], reason: str,
            mechanisms: list[str]) -> Any:
    log.warning("refused SaslHandshake v%d for mechanism %s from %s on listener %s "
                "(connection %d): %s (error %d %s)", ctx.version, mechanism, ctx.peer,
                ctx.session.listener_name, ctx.connection_id, reason, error.code,
                error.__name__)
    return ctx.response({"error_code": error.code, "mechanisms": mechanisms})


@api(key=17, versions=(0, 1))
async def sasl_handshake(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    mechanisms = enabled_mechanisms(session.settings) if session.uses_sasl else []
    if not session.uses_sasl or session.authenticated or session.exchange is not None:
        session.close_after_response = True
        reason = ("a second handshake on this connection" if session.uses_sasl
                  else f"the listener is {session.security_protocol}, not SASL")
        return _refuse(ctx, req.mechanism, errors.IllegalSaslState, reason, mechanisms)
    if req.mechanism not in mechanisms:
        return _refuse(ctx, req.mechanism, errors.UnsupportedSaslMechanism,
                       f"enabled mechanisms: {', '.join(mechanisms)}", mechanisms)
    session.exchange = _exchange(ctx, req.mechanism)
    session.raw_tokens = ctx.version == 0
    return ctx.response({"error_code": 0, "mechanisms": mechanisms})
