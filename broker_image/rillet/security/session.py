"""Who is on the other end of one connection, and how far its authentication has got.

A connection on a PLAINTEXT or SSL listener is authenticated from the start (as
User:ANONYMOUS, or the subject of its client certificate); one on a SASL listener only after
SaslHandshake and SaslAuthenticate have succeeded, and until then may send nothing else but
ApiVersions. After a v0 SaslHandshake (KIP-43's first form, still sent by kafka-python 2.0
and older Sarama) the SASL tokens follow as bare size-prefixed frames with no request
header, until the exchange ends; ``awaits_raw_token`` tells the server and dispatch so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Kafka's principal of a connection nobody authenticated (PLAINTEXT, TLS without a client
# certificate).
ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class AuthenticationFailed(Exception):
    """The client's credentials are wrong (raised by the session's exchange: sasl.py); the
    message is for the log, not the client."""


@dataclass
class Session:
    """One connection's listener, principal and authentication state."""
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    client_host: str = ""
    principal: str = ANONYMOUS
    authenticated: bool = True
    # The SASL exchange under way (PlainExchange / ScramExchange), after SaslHandshake.
    exchange: Any = None
    # The handshake was v0: the exchange's tokens come without SaslAuthenticate framing.
    raw_tokens: bool = False
    # Set by a handler whose answer must be the connection's last (a failed authentication).
    close_after_response: bool = False
    settings: Any = field(default=None, repr=False)   # the listener's ListenerSettings
    # Set by dispatch when a client quota throttles a request (time.monotonic): the server
    # reads nothing more from this connection before then, as Kafka mutes the channel.
    muted_until: float = 0.0

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def awaits_raw_token(self) -> bool:
        """The next frame is a bare SASL token, not a Kafka request."""
        return self.raw_tokens and self.exchange is not None and not self.authenticated

    def may_send(self, api_key: int) -> bool:
        return self.authenticated or api_key in BEFORE_AUTHENTICATION
