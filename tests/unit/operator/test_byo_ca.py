"""Bring your own CA (spec.certificates.generateCertificateAuthority false): what the operator
accepts as a CA and what it says about one it cannot use. Pure, plus the Secret check."""
from __future__ import annotations

import asyncio
import base64
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from rillet_operator import pki
from rillet_operator.handlers import certificates
from rillet_operator.spec import SpecError, parse_cluster

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)


def rsa_ca(ca: bool = True, days: int = 3650, start: datetime = NOW) -> pki.KeyPair:
    """An RSA CA as openssl or a company PKI would hand one over."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "acme root")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start - timedelta(days=1))
            .not_valid_after(start + timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return pki.KeyPair(key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
                       cert.public_bytes(serialization.Encoding.PEM).decode())


@pytest.fixture(scope="module")
def good() -> pki.KeyPair:
    return rsa_ca()


def test_generate_ca_is_parsed_and_checked():
    raw = {"replicas": 1, "listeners": [{"name": "tls", "port": 9094, "tls": True}]}
    assert parse_cluster("c", "ns", raw).certificates.generate_ca is True
    raw["certificates"] = {"generateCertificateAuthority": False}
    assert parse_cluster("c", "ns", raw).certificates.generate_ca is False
    raw["certificates"] = {"generateCertificateAuthority": "no"}
    with pytest.raises(SpecError, match="generateCertificateAuthority"):
        parse_cluster("c", "ns", raw)


def test_an_rsa_ca_is_accepted_and_signs_broker_certificates(good):
    assert pki.ca_problem(good, NOW) is None
    leaf = pki.issue_cert(good, "c-broker", ["c-bootstrap", "198.19.255.11"], NOW, 90,
                          client=True, server=True)
    assert pki.issued_by(leaf.cert_pem, good.cert_pem)
    assert pki.covers(leaf.cert_pem, ["c-bootstrap", "198.19.255.11"])


def test_the_operators_own_ca_passes_too():
    assert pki.ca_problem(pki.new_ca("x", NOW, 3650), NOW) is None


def test_unusable_cas_say_why(good):
    other = rsa_ca()
    cases = [
        (pki.KeyPair(good.key_pem, "junk"), "not a PEM X.509 certificate"),
        (pki.KeyPair("junk", good.cert_pem), "not an unencrypted PEM private key"),
        (pki.KeyPair(other.key_pem, good.cert_pem), "does not belong to its certificate"),
        (rsa_ca(ca=False), "not a CA"),
        (rsa_ca(days=10, start=NOW - timedelta(days=20)), "expired on"),
    ]
    for keypair, words in cases:
        assert words in (pki.ca_problem(keypair, NOW) or ""), words


def test_a_ca_close_to_expiry_still_serves_with_a_warning():
    """The operator cannot renew a CA it did not make: within renewalDays it warns and keeps
    using it (refusing it stopped every reconcile of a cluster whose certificates still work)."""
    soon = rsa_ca(days=10)
    assert pki.ca_problem(soon, NOW) is None
    assert "within renewalDays (30)" in (pki.ca_expiry_warning(soon.cert_pem, NOW, 30) or "")
    assert pki.ca_expiry_warning(soon.cert_pem, NOW, 5) is None


def _secret(**data: str) -> dict:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_the_secret_may_name_them_as_strimzi_does(good):
    assert pki.user_ca_keypair(_secret(**{"ca.key": good.key_pem, "ca.crt": good.cert_pem})) \
        == good
    assert pki.user_ca_keypair(_secret(**{"tls.key": good.key_pem, "tls.crt": good.cert_pem})) \
        == good


@pytest.mark.parametrize("secret, reason, words", [
    (None, "CertificateAuthorityMissing", "is missing"),
    (_secret(**{"ca.crt": "x"}), "CertificateAuthorityInvalid", "lacks 'ca.key'"),
    (_secret(**{"ca.key": "x", "ca.crt": "y"}), "CertificateAuthorityInvalid",
     "not a PEM X.509"),
])
def test_a_missing_or_bad_secret_is_a_clear_condition(secret, reason, words):
    with pytest.raises(certificates.CertificateError) as err:
        certificates._users_ca(secret, "c-cluster-ca", NOW)
    assert err.value.reason == reason
    assert words in str(err.value) and "generateCertificateAuthority is false" in str(err.value)


def test_the_brought_ca_is_never_replaced(monkeypatch, good):
    """With generateCertificateAuthority false, _ca only reads: no create, whatever it finds."""
    cs = parse_cluster("c", "ns", {"replicas": 1, "listeners": [{"name": "t", "port": 9094}],
                                   "certificates": {"generateCertificateAuthority": False}})

    async def get(name, namespace):
        return _secret(**{"ca.key": good.key_pem, "ca.crt": good.cert_pem})
    monkeypatch.setattr(certificates, "_get", get)
    monkeypatch.setattr(certificates, "kube", lambda: pytest.fail("no API writes"))
    got = asyncio.run(certificates._ca(cs, "c-cluster-ca", "c cluster CA", NOW, None, None))
    assert got.signer == good and got.trusted == (good.cert_pem,)
