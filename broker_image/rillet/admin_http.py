"""The broker's HTTP admin endpoint (config admin.http.listener = HOST:PORT; off when empty).

The contract the operator's probes and Prometheus rely on:
  GET /healthz  200 "ok" while the process serves (the listeners are bound)
  GET /readyz   200 {"ready": true} when registered, unfenced and caught up with the
                metadata log; else 503 {"ready": false, "reason": ...} (reasons: readiness.py)
  GET /metrics  200, Prometheus text (prometheus-client's exposition; names: metrics.py)
  other paths 404, other methods 405 (Allow: GET), a malformed request 400 and closed.
A query string is ignored. Every response closes its connection (Connection: close):
probes and scrapes open one per request, and no keep-alive state is kept.

I/O apart from protocol: parse_request_head and respond are plain functions (unit-tested
bytes in, bytes out); AdminHttpServer only moves bytes, on the broker's event loop,
with a read timeout, a header size limit and a connection cap, so a slow, huge or
garbage request costs one connection and a log line, never the broker.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST

from .defs.broker_config import BrokerConfig
from .lifecycle import BrokerLifecycle
from .metrics import BrokerMetrics
from .readiness import NOT_STARTED, Readiness, readiness

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024   # request line + headers
READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                   b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class BadRequest(ValueError):
    """Not an HTTP/1.x request head; the connection is answered 400 and closed."""


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str          # without the query string


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=())

    def encode(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {_REASONS.get(self.status, '')}",
                 f"Content-Type: {self.content_type}",
                 f"Content-Length: {len(self.body)}",
                 "Connection: close",
                 *(f"{k}: {v}" for k, v in self.headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


class Endpoints(Protocol):
    """What the routes ask the broker (admin_http never reaches into it otherwise)."""

    def readiness(self) -> Readiness: ...

    def metrics(self) -> bytes: ...


class EndpointSource(Protocol):
    """What the routes read of a broker (the Broker matches it; nothing here imports it)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def lifecycle(self) -> BrokerLifecycle | None: ...

    @property
    def metrics(self) -> BrokerMetrics: ...


class BrokerEndpoints:
    """The routes' view of a broker: its lifecycle for /readyz, its registry for /metrics."""

    def __init__(self, broker: EndpointSource) -> None:
        self.broker = broker

    def readiness(self) -> Readiness:
        lifecycle = self.broker.lifecycle
        view = lifecycle.view() if lifecycle is not None else NOT_STARTED
        return readiness(view, self.broker.config["broker.session.timeout.ms"] / 1000)

    def metrics(self) -> bytes:
        return self.broker.metrics.exposition()


def parse_request_head(head: bytes) -> HttpRequest:
    """The request line of an HTTP/1.x head (ending in a blank line); headers are only
    checked for shape, since no route needs one. Raises BadRequest."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest("undecodable") from None
    lines = text.split("\r\n")
    if len(lines) < 3 or lines[-1] != "" or lines[-2] != "":
        raise BadRequest("the head does not end in a blank line")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequest(f"bad request line {lines[0][:80]!r}")
    method, target, version = parts
    if not method or not set(method.encode("latin-1")) <= _TOKEN:
        raise BadRequest(f"bad method {method[:20]!r}")
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(f"unsupported protocol {version[:20]!r}")
    if not target.startswith("/") or any(c <= " " or c == "\x7f" for c in target):
        raise BadRequest(f"bad request target {target[:80]!r}")
    for line in lines[1:-2]:
        name, sep, _ = line.partition(":")
        if not sep or not name or not set(name.encode("latin-1")) <= _TOKEN:
            raise BadRequest(f"bad header line {line[:80]!r}")
    return HttpRequest(method, target.split("?", 1)[0])


def respond(request: HttpRequest, endpoints: Endpoints) -> HttpResponse:
    if request.path not in ("/healthz", "/readyz", "/metrics"):
        return HttpResponse(404, b"not found\n")
    if request.method != "GET":
        return HttpResponse(405, b"method not allowed\n", headers=(("Allow", "GET"),))
    if request.path == "/healthz":
        return HttpResponse(200, b"ok")
    if request.path == "/readyz":
        ready = endpoints.readiness()
        body = json.dumps(ready.as_json()).encode()
        return HttpResponse(200 if ready.ready else 503, body, "application/json")
    return HttpResponse(200, endpoints.metrics(), CONTENT_TYPE_LATEST)


class AdminHttpServer:
    """The listener; owned by the CLI's serve(), on the broker's event loop."""

    def __init__(self, endpoints: Endpoints, host: str, port: int) -> None:
        self.endpoints = endpoints
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def bind(self) -> None:
        """Bind and serve at once (the CLI binds every listener first). Raises OSError."""
        await self.start()

    async def start(self) -> None:
        """Bind and serve. Raises OSError (a taken port, a bad host)."""
        self._server = await asyncio.start_server(
            self._on_connect, self.host, self.port, reuse_address=True, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("admin HTTP endpoint on %s:%d (/healthz, /readyz, /metrics)", self.host,
                 self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=2)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            if len(self._connections) > MAX_CONNECTIONS:
                log.warning("admin HTTP: closing a connection: %d already open",
                            MAX_CONNECTIONS)
                return
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # shutdown; end quietly (asyncio would log it from a stream callback)
        except Exception:
            log.exception("admin HTTP: request failed")
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = "%s:%s" % (writer.get_extra_info("peername") or ("?", "?"))[:2]
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            response = respond(parse_request_head(head), self.endpoints)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # closed before a whole head: nothing to answer
        except TimeoutError:
            log.info("admin HTTP: closing connection from %s: no request within %.0fs",
                     peer, READ_TIMEOUT_S)
            return
        except (asyncio.LimitOverrunError, ValueError) as exc:
            # ValueError: a head over the limit surfaces as one from readuntil; BadRequest.
            log.info("admin HTTP: closing connection from %s: malformed request: %s",
                     peer, exc)
            response = HttpResponse(400, b"bad request\n")
        writer.write(response.encode())
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
