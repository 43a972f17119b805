"""Envelope (key 58), v0: a request a broker forwards on behalf of its client (KIP-590).

Served on the controller listener only. The inner frame is handled as if the client had sent
it here, with the client's principal and host from the envelope, so the authorizer judges
the client and not the forwarding broker. The answer carries the inner response frame.
With an authorizer on, the sender itself must hold CLUSTER_ACTION on the cluster, as in
Kafka: whoever merely reaches the controller listener cannot claim to be someone else.
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol import errors
from ..protocol.codec import FramingError
from ..security.session import Session
from .registry import CLUSTER, RequestContext, api

log = logging.getLogger(__name__)


@api(key=58, versions=(0, 0), scope="controller")
async def envelope(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorized("CLUSTER_ACTION", "CLUSTER", CLUSTER):
        return ctx.response({"response_data": None,
                             "error_code": errors.ClusterAuthorizationFailed.code})
    try:
        principal = bytes(req.request_principal or b"User:ANONYMOUS").decode()
    except UnicodeDecodeError:
        log.warning("refusing a forwarded request from %s: its principal is not UTF-8",
                    ctx.peer)
        return ctx.response({"response_data": None, "error_code": errors.InvalidRequest.code})
    inner = Session(listener_name="FORWARDED", security_protocol="PLAINTEXT",
                    client_host=bytes(req.client_host_address or b"").decode(errors="replace"),
                    principal=principal)
    assert ctx.redispatch is not None, "an Envelope is only served through dispatch"
    try:
        frame = await ctx.redispatch(ctx.broker, bytes(req.request_data), ctx.peer,
                                     ctx.connection_id, "broker", inner)
    except FramingError as exc:
        log.warning("refusing a forwarded request from %s: %s", ctx.peer, exc)
        return ctx.response({"response_data": None, "error_code": errors.InvalidRequest.code})
    return ctx.response({"response_data": None if frame is None else frame[4:],
                         "error_code": 0})
