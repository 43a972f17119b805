"""SaslHandshake (key 17), v1: the client names its SASL mechanism.

Only on a SASL listener and only once per connection. v0 (raw SASL tokens outside Kafka's
framing) is not served: every maintained client sends v1 and then SaslAuthenticate.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from ..security.sasl import PLAIN, PlainExchange, ScramExchange, enabled_mechanisms, \
    parse_jaas_users
from .registry import RequestContext, api


def _exchange(ctx: RequestContext, mechanism: str) -> Any:
    session = ctx.session
    if mechanism == PLAIN:
        return PlainExchange(parse_jaas_users(session.settings.jaas(PLAIN) or ""))
    return ScramExchange(mechanism, ctx.broker.scram_credential)


@api(key=17, versions=(1, 1))
async def sasl_handshake(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    mechanisms = enabled_mechanisms(session.settings) if session.uses_sasl else []
    if not session.uses_sasl or session.authenticated or session.exchange is not None:
        session.close_after_response = True
        return ctx.response({"error_code": errors.IllegalSaslState.code,
                             "mechanisms": mechanisms})
    if req.mechanism not in mechanisms:
        return ctx.response({"error_code": errors.UnsupportedSaslMechanism.code,
                             "mechanisms": mechanisms})
    session.exchange = _exchange(ctx, req.mechanism)
    return ctx.response({"error_code": 0, "mechanisms": mechanisms})
