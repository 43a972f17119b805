"""What the metadata log keeps of a SCRAM user (KIP-554): salt, iteration count, StoredKey
and ServerKey, never a password, and how the controller derives them from the
SaltedPassword AlterUserScramCredentials carries (RFC 5802, section 3).

Apart from the SASL exchanges (sasl.py) because every node's metadata image holds these,
while only a node with a SASL listener runs an exchange.

Thread safety: immutable values and pure functions.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from ..defs.sasl import SCRAM_SHA_256, SCRAM_SHA_512

HASHES = {SCRAM_SHA_256: hashlib.sha256, SCRAM_SHA_512: hashlib.sha512}
MIN_ITERATIONS = 4096     # Kafka's bounds for SCRAM credentials
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism, as the metadata image holds it."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def scram_credential(mechanism: str, salted_password: bytes, salt: bytes,
                     iterations: int) -> ScramCredential:
    """What the server keeps of a SaltedPassword (as AlterUserScramCredentials sends it):
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key") (RFC 5802, section 3)."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(),
                           hmac.new(salted_password, b"Server Key", digest).digest(),
                           iterations)
