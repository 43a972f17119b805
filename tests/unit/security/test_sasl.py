"""SASL exchanges (pure): SCRAM against RFC 7677's test vector, PLAIN, JAAS parsing."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from rillet.defs.sasl import parse_jaas_users
from rillet.security.sasl import PlainExchange, ScramExchange
from rillet.security.scram_credential import scram_credential
from rillet.security.session import AuthenticationFailed

# RFC 7677, section 3: SCRAM-SHA-256 for user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential():
    # What a client sends in AlterUserScramCredentials: SaltedPassword = Hi(password, salt, i).
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", SALT, 4096)
    return scram_credential("SCRAM-SHA-256", salted, SALT, 4096)


def test_scram_sha_256_exchange_matches_rfc_7677():
    cred = _rfc_credential()
    exchange = ScramExchange("SCRAM-SHA-256",
                             lambda user, mech: cred if (user, mech) == ("user", "SCRAM-SHA-256")
                             else None, server_nonce=SERVER_NONCE)
    assert exchange.step(CLIENT_FIRST.encode()).decode() == SERVER_FIRST
    assert exchange.principal is None
    assert exchange.step(CLIENT_FINAL.encode()).decode() == SERVER_FINAL
    assert exchange.principal == "User:user"


def test_scram_wrong_proof_and_unknown_user_fail_the_same_way():
    cred = _rfc_credential()
    wrong = CLIENT_FINAL[:-10] + "AAAAAAAAA="
    exchange = ScramExchange("SCRAM-SHA-256", lambda u, m: cred, server_nonce=SERVER_NONCE)
    exchange.step(CLIENT_FIRST.encode())
    with pytest.raises(AuthenticationFailed):
        exchange.step(wrong.encode())
    assert exchange.principal is None
    # An unknown user still gets a server-first (salt and count of a random credential).
    stranger = ScramExchange("SCRAM-SHA-256", lambda u, m: None, server_nonce=SERVER_NONCE)
    first = stranger.step(CLIENT_FIRST.encode()).decode()
    assert first.startswith("r=rOprNGfwEbeRWgbNEkqO") and ",i=4096" in first
    with pytest.raises(AuthenticationFailed):
        stranger.step(CLIENT_FINAL.encode())
    assert stranger.principal is None


def _client_final_echoing(nonce: str) -> str:
    """A client-final for RFC 7677's exchange that echoes ``nonce`` and signs it, as a
    client computes it (RFC 5802, section 3)."""
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{CLIENT_FIRST[3:]},{SERVER_FIRST},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message,
                         hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_scram_helper_reproduces_the_rfc_client_final():
    assert _client_final_echoing("rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE) == CLIENT_FINAL


@pytest.mark.parametrize("echoed,ok", [
    # librdkafka < 2.6.1 (Debian 12's 2.0.2): its own nonce, then the whole combined nonce.
    ("rOprNGfwEbeRWgbNEkqO" * 2 + SERVER_NONCE, True),
    # Kafka 3.8.1-3.9's check ("ends with") let any prefix through; rillet does not.
    ("junk" + "rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE, False),
    ("rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE[:-1], False),
], ids=["librdkafka-2.0-doubled", "other-prefix", "truncated"])
def test_scram_accepts_old_librdkafkas_doubled_client_nonce_only(echoed, ok):
    cred = _rfc_credential()
    exchange = ScramExchange("SCRAM-SHA-256", lambda u, m: cred, server_nonce=SERVER_NONCE)
    exchange.step(CLIENT_FIRST.encode())
    final = _client_final_echoing(echoed).encode()
    if ok:
        assert exchange.step(final).startswith(b"v=")
        assert exchange.principal == "User:user"
    else:
        with pytest.raises(AuthenticationFailed):
            exchange.step(final)
        assert exchange.principal is None


def test_scram_garbage_is_an_authentication_failure_not_a_crash():
    exchange = ScramExchange("SCRAM-SHA-512", lambda u, m: None)
    with pytest.raises(AuthenticationFailed):
        exchange.step(b"\xff\xfe not scram")


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="al\\"ice";')


def test_jaas_user_entries_are_parsed_and_login_options_ignored():
    assert parse_jaas_users(JAAS) == {"admin": "admin-secret", "alice": 'al"ice'}


@pytest.mark.parametrize("token,ok", [
    (b"\0admin\0admin-secret", True),
    (b"admin\0admin\0admin-secret", True),
    (b"\0admin\0wrong", False),
    (b"\0nobody\0admin-secret", False),
    (b"alice\0admin\0admin-secret", False),   # admin may not act for alice
    (b"no separators", False),
])
def test_plain_checks_user_and_password(token, ok):
    exchange = PlainExchange(parse_jaas_users(JAAS))
    if ok:
        assert exchange.step(token) == b""
        assert exchange.principal == "User:admin"
    else:
        with pytest.raises(AuthenticationFailed):
            exchange.step(token)
        assert exchange.principal is None
