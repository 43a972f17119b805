"""SASL exchanges on the broker side: PLAIN and SCRAM-SHA-256/512 (RFC 4616, 5802, 7677).

PLAIN checks a password against the `user_<name>="<password>"` entries of the listener's
JAAS line, as Kafka's PlainLoginModule does. SCRAM runs through scramp (the exchange, nonce
and proof checks are its job) against credentials kept in the metadata log: only the salt,
iteration count, StoredKey and ServerKey are stored, never a password. An unknown user
goes through the same exchange against a random credential, so a client cannot tell a
wrong user from a wrong password.

Loaded by the first SaslHandshake (on_demand.py): a node without a SASL listener never
imports it. What the metadata image keeps of a SCRAM user is scram_credential.py's.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from types import ModuleType
from typing import Callable

from ..defs.sasl import PLAIN
from .scram_credential import HASHES, MIN_ITERATIONS, ScramCredential
from .session import AuthenticationFailed


def _scramp() -> ModuleType:
    """scramp, loaded by the first SCRAM login: it and what it pulls in (asn1crypto, decimal,
    importlib.metadata) were about a tenth of the broker's import time, and most brokers never
    see a SCRAM login."""
    import scramp
    return scramp


class PlainExchange:
    """One PLAIN authentication: a single message `authzid NUL authcid NUL password`."""

    mechanism = PLAIN

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.principal: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed(f"{user} may not act for {authzid}")
        known = self.users.get(user)
        # compare_digest on equal-length digests: the time taken says nothing of the password.
        if known is None or not hmac.compare_digest(
                hashlib.sha256(known.encode()).digest(), hashlib.sha256(password.encode()).digest()):
            raise AuthenticationFailed(f"wrong user name or password for {user!r}")
        self.principal = "User:" + user
        return b""


class ScramExchange:
    """One SCRAM authentication: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._scramp = _scramp()
        self._server = self._scramp.ScramMechanism(mechanism).make_server(
            self._auth_info, s_nonce=server_nonce)
        self._user: str | None = None
        self._known = False
        self._round = 0
        self.principal: str | None = None

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self._user = user
        cred = self._lookup(user, self.mechanism)
        self._known = cred is not None
        if cred is None:
            digest_size = HASHES[self.mechanism]().digest_size
            cred = ScramCredential(os.urandom(16), os.urandom(digest_size),
                                   os.urandom(digest_size), MIN_ITERATIONS)
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _accept_doubled_client_nonce(self, client_final: str) -> None:
        """librdkafka from 0.0.99 to 2.6.0 echoes the nonce as client nonce + the whole
        combined nonce (its own part twice) and signs that message (fixed in 2.6.1). Kafka
        3.x lets it through (3.8.1-3.9 check "ends with the combined nonce", their fix of
        CVE-2024-56128; older ones did not check; Kafka 4 refuses it), so Debian 12's clients
        log in there. Accept exactly that form, nothing looser: the server's fresh nonce is
        still required. scramp compares against its ``nonce`` and builds the AuthMessage
        from the message as received, so the proof is still checked in full."""
        combined = self._server.nonce        # a scramp Nonce (scramp pinned: 1.5.0)
        text = str(combined)
        client_nonce = text[:len(text) - len(str(self._server.s_nonce))]
        fields = dict(f.split("=", 1) for f in client_final.split(",") if "=" in f)
        if fields.get("r") == client_nonce + text:
            self._server.nonce = type(combined)(client_nonce + text)

    def step(self, token: bytes) -> bytes:
        self._round += 1
        try:
            text = token.decode("utf-8")
            if self._round == 1:
                self._server.set_client_first(text)
                return self._server.get_server_first().encode()
            if self._round == 2:
                self._accept_doubled_client_nonce(text)
                self._server.set_client_final(text)
                if not self._known:
                    raise AuthenticationFailed(f"unknown user {self._user!r}")
                final = self._server.get_server_final().encode()
                self.principal = "User:" + (self._user or "")
                return final
        except (self._scramp.ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"{self.mechanism} exchange for {self._user!r} "
                                       f"failed: {exc}") from None
        raise AuthenticationFailed("SCRAM exchange already complete")
