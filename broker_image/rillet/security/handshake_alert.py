"""Send the TLS alert of a refused handshake before the connection closes.

asyncio's SSL protocol (CPython 3.11-3.13, asyncio/sslproto.py) handles a failed server-side
handshake (no client certificate, an untrusted one) by closing the transport at once. The
alert OpenSSL wrote for the client (bad_certificate, certificate_required, unknown_ca) is left
in the protocol's outgoing buffer. The client then sees a bare close: Kafka's Java client
retries until its timeout, where against Kafka it fails at once with
SslAuthenticationException naming the alert.

`install()` wraps SSLProtocol._do_handshake so that, on an SSLError, the pending outgoing
bytes are flushed to the socket first. A socket with an empty write buffer takes the few
bytes of an alert at once, before the close. The patch goes in only where the private
methods it relies on exist; otherwise the behaviour stays as it was.
"""
from __future__ import annotations

import logging
import ssl
from asyncio import sslproto
from typing import Any, Callable

log = logging.getLogger(__name__)
_installed = False
# What asyncio treats as "handshake not finished yet" (SSLSyscallError is an SSLError too).
_AGAIN = getattr(sslproto, "SSLAgainErrors", (ssl.SSLWantReadError, ssl.SSLSyscallError))


def _flushing(original: Callable[[Any], None]) -> Callable[[Any], None]:
    def _do_handshake(self: Any) -> None:
        try:
            self._sslobj.do_handshake()
        except _AGAIN:
            self._process_outgoing()
        except ssl.SSLError as exc:
            try:
                self._process_outgoing()    # the alert, so the client learns why
            except Exception:               # the peer may be gone: close as before
                pass
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)
    _do_handshake.__wrapped__ = original   # type: ignore[attr-defined]
    return _do_handshake


def install() -> bool:
    """Patch once; False when this Python's asyncio does not have the expected shape."""
    global _installed
    cls = getattr(sslproto, "SSLProtocol", None)
    needed = ("_do_handshake", "_process_outgoing", "_on_handshake_complete")
    if cls is None or not all(hasattr(cls, name) for name in needed):
        log.info("TLS handshake alerts: this asyncio has no SSLProtocol._do_handshake; a "
                 "refused handshake closes without its alert")
        return False
    if not _installed:
        cls._do_handshake = _flushing(cls._do_handshake)
        _installed = True
    return True
