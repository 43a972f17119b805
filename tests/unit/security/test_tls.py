"""TLS settings and context handling without a network: what an SSL listener needs, the
principal a client certificate maps to, and reloading renewed files (a fake clock)."""
from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from rillet.defs.tls import TlsConfigError, TlsSettings
from rillet.security.tls import (ANONYMOUS, ReloadingContext, client_context, peer_principal,
                                 server_context)


class _Peer:
    def __init__(self, cert):
        self._cert = cert

    def getpeercert(self):
        return self._cert


def test_the_principal_is_the_subject_most_specific_first_as_kafka_prints_it():
    cert = {"subject": ((("countryName", "DE"),), (("organizationName", "Acme, Inc."),),
                        (("organizationalUnitName", "payments"),),
                        (("commonName", "orders-app"),))}
    assert peer_principal(_Peer(cert)) == \
        "User:CN=orders-app,OU=payments,O=Acme\\, Inc.,C=DE"
    assert peer_principal(_Peer({})) == ANONYMOUS
    assert peer_principal(None) == ANONYMOUS


@pytest.mark.parametrize("settings,message", [
    (TlsSettings(), "needs a key and certificate"),
    (TlsSettings(keystore_key="K"), "go together"),
    (TlsSettings(keystore_location="/k.pem", keystore_key="K", keystore_chain="C"),
     "either ssl.keystore.location or"),
    (TlsSettings(keystore_location="/k.pem", client_auth="required"), "needs a truststore"),
    (TlsSettings(keystore_location="/k.pem", keystore_type="JKS"), "PEM files only"),
])
def test_incomplete_settings_name_what_is_missing(settings, message):
    with pytest.raises(TlsConfigError, match=message):
        settings.check()


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def test_inline_pem_keystore_and_truststore_build_contexts(ca: trustme.CA):
    cert = ca.issue_cert("127.0.0.1")
    s = TlsSettings(keystore_key=cert.private_key_pem.bytes().decode(),
                    keystore_chain=b"".join(p.bytes() for p in cert.cert_chain_pems).decode(),
                    truststore_certificates=ca.cert_pem.bytes().decode(),
                    client_auth="required")
    server = server_context(s)
    assert server.verify_mode == ssl.CERT_REQUIRED
    client = client_context(s)
    assert client.check_hostname and client.verify_mode == ssl.CERT_REQUIRED


def test_a_renewed_file_is_loaded_at_the_next_check_and_a_broken_one_is_not(
        tmp_path: Path, ca: trustme.CA):
    keystore = tmp_path / "k.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    now = [0.0]
    ctx = ReloadingContext(TlsSettings(keystore_location=str(keystore)), clock=lambda: now[0])
    first = ctx.current()
    ca.issue_cert("127.0.0.1", common_name="renewed") \
        .private_key_and_cert_chain_pem.write_to_path(str(keystore))
    assert ctx.current() is first, "not before the next check"
    now[0] += 10
    renewed = ctx.current()
    assert renewed is not first and ctx.reloads == 1
    keystore.write_text("half-written")
    now[0] += 10
    assert ctx.current() is renewed and ctx.reloads == 1
