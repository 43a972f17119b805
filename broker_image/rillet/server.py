"""asyncio listeners: framing, per-connection in-order responses, limits, shutdown.

Only moves bytes: a frame is read (int32 size + body), handed to dispatch,
and its response written (a Fetch's records with sendfile, frame_writer.py) before the
next frame is read, so responses leave in request order, as Kafka guarantees per
connection. A framing error closes that one connection with a log line; the broker
carries on. An SSL listener does its TLS handshake first, with the context current at that
moment (so a renewed certificate applies to new connections); a failed handshake closes
that connection only. A connection that sends no bytes for longer than
connections.max.idle.ms while it waits for its next request, or for the rest of one, is closed
by one periodic sweep over all of them; so is one whose peer reads nothing of an answer for as
long (tcp_progress.py).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
import struct
import time
from typing import TYPE_CHECKING, Any

from .dispatch import dispatch_frame
from .frame_writer import write_frame
from .peer_watch import PeerWatch
from .protocol.codec import FramingError, peek_key_version
from .protocol.file_records import ShortFile
from .security import handshake_alert
from .security.session import ANONYMOUS, Session
from .tcp_progress import send_progress

if TYPE_CHECKING:   # a type only: the CLI loads security/tls.py for a TLS listener only
    from .security.tls import ReloadingContext

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_LINGER_RESET = struct.pack("ii", 1, 0)   # struct linger: on, 0 s
TLS_HANDSHAKE_TIMEOUT_S = 10.0
# The idle sweep runs every tenth of connections.max.idle.ms, within these bounds: an idle
# connection is closed within 110 % of the setting (or the setting plus the largest).
IDLE_SWEEP_MIN_S = 0.05
IDLE_SWEEP_MAX_S = 5.0


class KafkaServer:
    def __init__(self, broker: Any, host: str, port: int, *, max_request_bytes: int,
                 idle_timeout_s: float, max_unauthenticated_bytes: int = 524288,
                 listener: str = "broker",
                 tls: ReloadingContext | None = None, listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", settings: Any = None) -> None:
        self.broker = broker
        self.tls = tls
        if tls is not None:
            handshake_alert.install()
        self.listener = listener
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.settings = settings
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.max_unauthenticated_bytes = max_unauthenticated_bytes
        self.idle_timeout_s = idle_timeout_s
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # connections with a request in progress
        self._ids = itertools.count(1)
        self._tls_watch: asyncio.Future[None] | None = None
        # Connections reading a request (the first bytes of the next, or the rest of one):
        # since when (time.monotonic), id, peer and the watch that knows when bytes last came.
        # One sweep closes those idle past connections.max.idle.ms, as Kafka's selector
        # does, instead of a timer armed and cancelled around every request.
        self._waiting: dict[asyncio.StreamWriter, tuple[float, int, str, PeerWatch]] = {}
        # Connections writing an answer: since when, id, peer and task; and, for the sweep,
        # the bytes each peer had acknowledged when it last saw them move, and when.
        self._writing: dict[asyncio.StreamWriter, tuple[float, int, str, asyncio.Task[None]]] = {}
        self._acked: dict[asyncio.StreamWriter, tuple[int, float]] = {}
        self._stalled: set[asyncio.StreamWriter] = set()   # cancelled by the sweep, to drop
        self._idle_sweep: asyncio.Task[None] | None = None

    async def bind(self) -> None:
        """Take the address without accepting yet, so a port in use is found before the
        broker loads anything. Raises OSError."""
        self._server = await asyncio.start_server(
            self._on_connect, self.host, self.port, reuse_address=True, limit=1 << 20,
            start_serving=False)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def start(self) -> None:
        """Accept connections (binding first if ``bind`` was not called). Raises OSError."""
        if self._server is None:
            await self.bind()
        assert self._server is not None
        await self._server.start_serving()
        if self.tls is not None:
            # Renewed files are picked up (or a broken one reported) without waiting for a
            # connection to ask.
            self._tls_watch = asyncio.ensure_future(self.tls.watch())
        # A negative connections.max.idle.ms never closes an idle connection, as in Kafka; nor
        # does 0, with which Kafka would close every connection as soon as it waits, leaving a
        # broker no client can use twice.
        if self.idle_timeout_s > 0:
            self._idle_sweep = asyncio.create_task(self._sweep_idle())
        log.info("listening on %s:%d (%s listener %s, %s)", self.host, self.port,
                 self.listener, self.listener_name, self.security_protocol)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            # Shutdown cancels idle connections: end quietly, or asyncio's stream callback
            # logs the cancellation as an error.
            pass
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn_id = next(self._ids)
        peer = "%s:%s" % (writer.get_extra_info("peername") or ("?", "?"))[:2]
        session = Session(self.listener_name, self.security_protocol, peer.rsplit(":", 1)[0],
                          settings=self.settings)
        session.authenticated = not session.uses_sasl
        try:
            if self.tls is not None:
                principal = await self._handshake(writer, conn_id, peer)
                if principal is None:
                    return
                session.principal = principal
            # After the handshake: TLS puts a protocol of its own under the stream's.
            watch = PeerWatch.install(writer)
            task = asyncio.current_task()
            assert task is not None
            while True:
                # Idle from here while no bytes come, until a whole request is in (_sweep_idle):
                # a peer that sends a size and stalls is closed too.
                self._waiting[writer] = (time.monotonic(), conn_id, peer, watch)
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                limit, setting = self.max_request_bytes, "socket.request.max.bytes"
                if not session.authenticated and self.max_unauthenticated_bytes < limit:
                    # As Kafka: before authentication a peer is bounded far lower.
                    limit = self.max_unauthenticated_bytes
                    setting = "sasl.server.max.receive.size"
                # A bare SASL token (after a v0 SaslHandshake) has no request header.
                least = 0 if session.awaits_raw_token else 8
                if size < least or size > limit:
                    log.warning("closing connection %d from %s: request size %d outside "
                                "[%d, %d] (%s)", conn_id, peer, size, least, limit, setting)
                    return
                frame = await reader.readexactly(size)
                # None: the sweep closed it as these bytes came in; no answer could leave.
                if self._waiting.pop(writer, None) is None:
                    return
                self._busy.add(task)
                try:
                    response = await dispatch_frame(self.broker, frame, peer, conn_id,
                                                    self.listener, session)
                    if response is not None:
                        # Fetch records go out of their files with sendfile, unless TLS
                        # must encrypt them (frame_writer.py).
                        self._writing[writer] = (time.monotonic(), conn_id, peer, task)
                        try:
                            await write_frame(writer, response, sendfile=self.tls is None)
                        finally:
                            self._writing.pop(writer, None)
                    if session.close_after_response:
                        return
                except (FramingError, ShortFile) as exc:
                    log.warning("closing connection %d from %s: %s", conn_id, peer, exc)
                    return
                except (ConnectionError, asyncio.CancelledError):
                    raise
                except Exception:
                    key, version, _ = peek_key_version(frame)
                    log.exception("closing connection %d from %s: api key %d v%d request "
                                  "failed", conn_id, peer, key, version)
                    return
                finally:
                    self._busy.discard(task)
                # A client quota throttled this request: read nothing more until the wait is
                # over (Kafka mutes the channel; KIP-219 clients wait as well). Idle, not busy,
                # meanwhile: a stopping broker cancels a muted connection at once.
                muted = session.muted_until - time.monotonic()
                if muted > 0:
                    await asyncio.sleep(muted)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        except asyncio.CancelledError:
            raise
        finally:
            self._waiting.pop(writer, None)
            self._acked.pop(writer, None)
            if writer in self._stalled:
                self._stalled.discard(writer)
                _drop(writer)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1)
            except (Exception, asyncio.CancelledError):
                pass

    async def _sweep_idle(self) -> None:
        """Close the connections that, reading a request, have had no bytes for longer than
        connections.max.idle.ms. A connection with a request in progress (a long poll) or
        muted by a quota is not reading, so never idle. The socket is dropped at once, as
        Kafka does, with whatever the peer has not read of earlier answers (a peer that
        stopped reading would hold a graceful close open): its read ends, and its task
        ends as for a peer that hung up."""
        interval = min(max(self.idle_timeout_s / 10, IDLE_SWEEP_MIN_S), IDLE_SWEEP_MAX_S)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            cutoff = now - self.idle_timeout_s
            for writer, (since, conn_id, peer, watch) in list(self._waiting.items()):
                # A request arriving slowly is in use: bytes came in since it began waiting.
                if since > cutoff or watch.last_read > cutoff:
                    continue
                del self._waiting[writer]
                log.info("closing idle connection %d from %s", conn_id, peer)
                try:
                    _drop(writer)
                except Exception:   # one connection's failure never stops the sweep
                    log.exception("closing idle connection %d from %s failed", conn_id, peer)
            self._sweep_writes(now, cutoff)

    def _sweep_writes(self, now: float, cutoff: float) -> None:
        """Close the connections whose peer, with bytes waiting for it, has acknowledged
        none of an answer for longer than connections.max.idle.ms (it stopped reading; a
        slow one is in use). Where the kernel does not tell, an answer's write is left to
        wait."""
        for writer in self._acked.keys() - self._writing.keys():
            del self._acked[writer]
        for writer, (since, conn_id, peer, task) in list(self._writing.items()):
            progress = send_progress(writer.get_extra_info("socket"))
            if progress is None:
                continue
            seen = self._acked.get(writer)
            # Nothing waiting: the peer has all that was sent (this loop was late to send).
            if seen is None or seen[0] != progress.acked or not progress.waiting:
                self._acked[writer] = (progress.acked, now)
                continue
            if since > cutoff or seen[1] > cutoff:
                continue
            del self._writing[writer], self._acked[writer]
            log.info("closing connection %d from %s: its peer read nothing of its answer "
                     "for connections.max.idle.ms", conn_id, peer)
            # The task first, its socket then (_serve): an answer going out with sendfile
            # waits in asyncio on the socket, which must still be open when that wait ends.
            self._stalled.add(writer)
            task.cancel()

    async def _handshake(self, writer: asyncio.StreamWriter, conn_id: int,
                         peer: str) -> str | None:
        """TLS on the accepted socket: the client's principal, or None (logged) when it does
        not complete the handshake: plaintext on a TLS port, an untrusted or missing client
        certificate, a timeout."""
        assert self.tls is not None
        try:
            await writer.start_tls(self.tls.current(),
                                   ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as exc:
            if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError):
                log.warning("closing connection %d from %s: TLS handshake failed: %s",
                            conn_id, peer, getattr(exc, "reason", None) or exc)
            else:
                # A port probe (a TCP readiness check) connects and hangs up: not an attack.
                log.debug("connection %d from %s closed during the TLS handshake (%s)",
                          conn_id, peer, type(exc).__name__)
            return None
        principal = self.tls.peer_principal(writer.get_extra_info("ssl_object"))
        if principal != ANONYMOUS:
            log.debug("connection %d from %s authenticated as %s", conn_id, peer, principal)
        return principal

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; close idle connections now, give busy ones a grace period."""
        if self._server is not None:
            self._server.close()
        if self._tls_watch is not None:
            self._tls_watch.cancel()
        if self._idle_sweep is not None:
            self._idle_sweep.cancel()
        for task in self._connections - self._busy:
            task.cancel()
        pending = list(self._connections)
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            # An answer still going out after the grace period is dropped with its connection.
            self._stalled.update(w for w, entry in self._writing.items() if entry[3] in still)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=1)


def _drop(writer: asyncio.StreamWriter) -> None:
    """Drop the connection at once. With bytes still waiting for the peer (an answer it left
    unread, even one the kernel took whole), with a reset (SO_LINGER 0): a close would leave
    the kernel holding them, up to a send buffer's worth, probing the shut window for
    minutes. Otherwise with a FIN, as Kafka closes an idle connection."""
    sock = writer.get_extra_info("socket")
    progress = send_progress(sock)
    try:
        if progress is not None and progress.waiting:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    except OSError:   # already gone
        pass
    writer.transport.abort()
