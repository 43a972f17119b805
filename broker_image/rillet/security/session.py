"""Who is on the other end of one connection, and how far its authentication has got.

A connection on a PLAINTEXT or SSL listener is authenticated from the start (as
User:ANONYMOUS, or the subject of its client certificate); one on a SASL listener only after
SaslHandshake and SaslAuthenticate have succeeded, and until then may send nothing else but
ApiVersions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tls import ANONYMOUS

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


@dataclass
class Session:
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    client_host: str = ""
    principal: str = ANONYMOUS
    authenticated: bool = True
    # The SASL exchange under way (PlainExchange / ScramExchange), after SaslHandshake.
    exchange: Any = None
    # Set by a handler whose answer must be the connection's last (a failed authentication).
    close_after_response: bool = False
    settings: Any = field(default=None, repr=False)   # the listener's ListenerSettings

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def may_send(self, api_key: int) -> bool:
        return self.authenticated or api_key in BEFORE_AUTHENTICATION
