"""Request dispatch: one frame in, one response frame (or none) out. No sockets here."""
from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from typing import Any

from .apis.registry import REGISTRY, ApiSpec, BrokerServices, RequestContext
from .apis.sasl_authenticate import raw_token
from .protocol.build import build
from .protocol.codec import (API_VERSIONS_KEY, FramingError, RequestHeader,
                             decode_header_only, decode_request, decode_response,
                             encode_response, encode_spliced_response, response_schema)
from .protocol.errors import UnsupportedVersion
from .protocol.file_records import SplicedFrame
from .protocol.splice import SplicedBody
from .quotas.busy import BusyTimer
from .quotas.entity import REQUEST_PERCENTAGE
from .security.session import Session

log = logging.getLogger(__name__)
# How long a relayed answer waits for this node's image to show the change: followers apply
# a commit within milliseconds (bench/metadata_propagation.py); past this the node lags
# (cut off from the quorum) and the answer goes out anyway, its readers get retriable errors.
SETTLE_S = 2.0
# Never held by request_percentage (Kafka's exempt APIs): a client must always be able to
# learn versions and authenticate, and brokers' own RPCs (AlterPartition, registration,
# heartbeats, transaction markers, forwarded requests) are cluster actions.
MAX_THROTTLE_MS = 2**31 - 1   # the int32 field's largest value
REQUEST_QUOTA_EXEMPT = frozenset({17, 18, 27, 36, 56, 58, 62, 63, 64})


def api_versions_table(listener: str = "broker") -> list[dict[str, int]]:
    return [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(REGISTRY.values(), key=lambda s: s.key) if s.served_on(listener)]


def _unsupported_api_versions(correlation_id: int, listener: str) -> bytes:
    """ApiVersions at a version we do not know: a v0 body with error 35 and our ranges,
    so the client retries with a version we support."""
    body = build(response_schema(API_VERSIONS_KEY, 0),
                 {"error_code": UnsupportedVersion.code,
                  "api_keys": api_versions_table(listener)})
    return encode_response(API_VERSIONS_KEY, correlation_id, body)


async def dispatch(broker: BrokerServices, frame: bytes, peer: str, connection_id: int,
                   listener: str = "broker", session: Session | None = None) -> bytes | None:
    """Handle one request frame (without its size prefix).

    Returns the response frame, or None when the request gets no response
    (acks=0 produce). Raises FramingError when the connection must be closed. After a v0
    SaslHandshake the frame is a bare SASL token instead, answered by one.
    """
    response = await dispatch_frame(broker, frame, peer, connection_id, listener, session)
    return response.materialise() if isinstance(response, SplicedFrame) else response


async def dispatch_frame(broker: BrokerServices, frame: bytes, peer: str, connection_id: int,
                         listener: str = "broker", session: Session | None = None
                         ) -> bytes | SplicedFrame | None:
    """``dispatch``, with a Fetch response's records left in their segment files: a
    SplicedFrame, which the caller sends (sendfile) or materialises, and closes."""
    session = session or Session()
    if session.awaits_raw_token:
        return await raw_token(broker, session, peer, connection_id, frame)
    header = decode_header_only(frame)
    spec = REGISTRY.get(header.api_key)
    if spec is None:
        raise FramingError(f"unknown api key {header.api_key}")
    if not session.may_send(header.api_key):
        raise FramingError(f"{spec.name} ({spec.key}) sent before SASL authentication on "
                           f"listener {session.listener_name}")
    if not spec.served_on(listener):
        raise FramingError(f"api {spec.name} ({spec.key}) is served on the controller "
                           "listener only")
    if not spec.supports(header.api_version):
        if header.api_key == API_VERSIONS_KEY:
            return _unsupported_api_versions(header.correlation_id, listener)
        raise FramingError(f"unsupported version {header.api_version} of api "
                           f"{spec.name} ({spec.key}); supported "
                           f"{spec.min_version}-{spec.max_version}")
    metrics = broker.metrics
    if metrics is None:
        return await _handle(broker, spec, header, frame, peer, connection_id, listener, session)
    started = time.perf_counter()
    try:
        return await _handle(broker, spec, header, frame, peer, connection_id, listener,
                             session)
    finally:
        metrics.request_done(listener, spec, header.api_version, time.perf_counter() - started)


async def _handle(broker: BrokerServices, spec: ApiSpec, header: RequestHeader, frame: bytes,
                  peer: str, connection_id: int, listener: str,
                  session: Session) -> bytes | SplicedFrame | None:
    """A supported request: relayed to the active controller, or answered here. It is
    decoded first either way, so a malformed one is refused here, as Kafka parses before it
    forwards, and never reaches the controller."""
    ctx = RequestContext(broker, header, peer, connection_id, listener, session,
                         redispatch=dispatch)
    if header.api_version < spec.decodable_from:
        assert spec.raw_handler is not None
        return spec.raw_handler(ctx, frame)
    header, body = decode_request(frame)
    forwarder = broker.forwarder
    if spec.forward and forwarder is not None and (spec.forward_when is None
                                                   or spec.forward_when(body)):
        relayed = await forwarder.relay(frame, session)
        if relayed is not None:
            await _settle(broker, spec, header, body, relayed)
            return relayed
    ctx.header = header
    ctx.request_bytes = len(frame)
    response = await _run(ctx, spec, body)
    if ctx.throttle_s > 0:
        ctx.session.muted_until = max(ctx.session.muted_until,
                                      time.monotonic() + ctx.throttle_s)
        response = _with_throttle(response, ctx.throttle_s)
    if response is None:
        return None
    if ctx.spliced:
        return encode_spliced_response(header.api_key, header.correlation_id, response)
    return encode_response(header.api_key, header.correlation_id, response)


async def _run(ctx: RequestContext, spec: ApiSpec, body: Any) -> Any:
    """The handler's response; with client quotas set, its running time counts against the
    client's request_percentage (percent of one thread: seconds * 100)."""
    if (spec.key in REQUEST_QUOTA_EXEMPT or ctx.listener == "controller"
            or not ctx.broker.image.client_quotas):
        return await spec.handler(ctx, body)
    timer = BusyTimer(spec.handler(ctx, body))
    response = await timer
    ctx.record_quota(REQUEST_PERCENTAGE, timer.busy_s * 100)
    return response


def _with_throttle(response: Any, throttle_s: float) -> Any:
    """The response with its throttle_time raised to ``throttle_s`` (a version without the
    field is left alone: the muted connection throttles that client all the same)."""
    if isinstance(response, SplicedBody):
        return dataclasses.replace(response, entity=_with_throttle(response.entity, throttle_s))
    if response is None or "throttle_time" not in getattr(response, "__dataclass_fields__", ()):
        return response
    wait = datetime.timedelta(milliseconds=min(int(throttle_s * 1000), MAX_THROTTLE_MS))
    return dataclasses.replace(response, throttle_time=max(response.throttle_time, wait))


async def _settle(broker: BrokerServices, spec: ApiSpec, header: RequestHeader, body: Any,
                  relayed: bytes) -> None:
    """Hold a relayed answer until this node's image shows the change it reports."""
    if spec.settled is None:
        return
    try:
        _, response = decode_response(header.api_key, header.api_version, relayed[4:])
    except FramingError as exc:
        log.info("relayed %s answer not decodable here, not waiting for it: %s", spec.name, exc)
        return
    settled = spec.settled
    if not await broker.metadata.wait_until(lambda image: settled(image, body, response),
                                            SETTLE_S):
        log.info("relayed %s answered before this node applied it (image lags %.0fs)",
                 spec.name, SETTLE_S)
