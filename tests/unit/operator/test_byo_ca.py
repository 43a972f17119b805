"""Bring your own CA (spec.certificates.generateCertificateAuthority false): what the operator
accepts as a CA and what it says about one it cannot use. Pure, plus the Secret check."""
from __future__ import annotations

import asyncio
import base64
import logging
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


def test_a_brought_ca_without_a_trailing_newline_rolls_nothing_on_upgrade(monkeypatch, good):
    """The CA PEMs a user pasted without their final newline, and the broker and operator
    Secrets as the operator before CA rollovers wrote them (ca.crt and clients-ca.crt: the CA
    certificate exactly as brought): a pass reissues no certificate, so the brokers' pod
    template keeps its fingerprint and nothing rolls."""
    cs = parse_cluster("c", "ns", {"replicas": 3,
                                   "listeners": [{"name": "t", "port": 9094, "tls": True}],
                                   "certificates": {"generateCertificateAuthority": False}})
    clients = rsa_ca()
    cluster_pem, clients_pem = good.cert_pem.rstrip("\n"), clients.cert_pem.rstrip("\n")
    assert not cluster_pem.endswith("\n")
    broker = pki.issue_cert(good, "c-broker", pki.broker_sans("c", "ns", 3), NOW, 365,
                            client=True, server=True)
    operator = pki.issue_cert(good, "c-operator", [], NOW, 365, client=True, server=False)
    broker_secret = pki.tls_secret("c-broker-certs", broker, cluster_pem)
    broker_secret["data"]["clients-ca.crt"] = pki.b64(clients_pem)
    secrets = {"c-cluster-ca": _secret(**{"ca.key": good.key_pem, "ca.crt": cluster_pem}),
               "c-clients-ca": _secret(**{"ca.key": clients.key_pem, "ca.crt": clients_pem}),
               "c-broker-certs": broker_secret,
               "c-operator-certs": pki.tls_secret("c-operator-certs", operator, cluster_pem)}
    applied: list[str] = []

    class Kube:
        def get(self, kind, name, namespace):
            return secrets.get(name)

        def apply(self, obj):
            applied.append(obj["metadata"]["name"])
    monkeypatch.setattr(certificates, "kube", lambda: Kube())
    for event in ("info", "warn"):
        monkeypatch.setattr(certificates.kopf, event, lambda *a, **k: None)
    owner = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
             "metadata": {"name": "c", "namespace": "ns", "uid": "u"}}
    issued = asyncio.run(certificates.ensure(cs, {}, {}, owner, logging.getLogger()))
    assert issued.broker_fingerprint == pki.fingerprint(broker.cert_pem)
    assert issued.operator == operator
    assert applied == ["c-cluster-ca-cert"]      # the published trust only, no certificate


def test_a_users_certificate_is_kept_when_its_ca_crt_differs_only_in_layout(monkeypatch, good):
    """A tls User's Secret from before CA rollovers holds the brought cluster CA without its
    final newline, the published cluster-ca-cert now holds it with one: the same trust, so
    the User keeps its key and certificate (a reissue would make every client reload)."""
    from rillet_operator.handlers import user
    from rillet_operator.spec import parse_user
    cs = parse_cluster("c", "ns", {"replicas": 1,
                                   "listeners": [{"name": "t", "port": 9094, "tls": True,
                                                  "authentication": {"type": "tls"}}],
                                   "certificates": {"generateCertificateAuthority": False}})
    us = parse_user("alice", "ns", {"cluster": "c", "authentication": {"type": "tls"}})
    clients = rsa_ca()
    cert = pki.issue_cert(clients, "alice", [], NOW, 365, client=True, server=False)
    existing = _secret(**{"user.crt": cert.cert_pem, "user.key": cert.key_pem,
                          "ca.crt": good.cert_pem.rstrip("\n")})
    secrets = {"c-clients-ca": _secret(**{"ca.key": clients.key_pem,
                                          "ca.crt": clients.cert_pem.rstrip("\n")}),
               "c-cluster-ca-cert": _secret(**{"ca.crt": pki.join_pems([good.cert_pem])})}

    class Kube:
        def get(self, kind, name, namespace):
            return secrets[name]

        def apply(self, obj):
            pytest.fail(f"reissued {obj['metadata']['name']}")
    monkeypatch.setattr(user, "kube", lambda: Kube())
    owner = {"apiVersion": "rillet.io/v1alpha1", "kind": "User",
             "metadata": {"name": "alice", "namespace": "ns", "uid": "u"}}
    asyncio.run(user._tls_credentials(us, cs, existing, owner, logging.getLogger()))
    # ... while a Secret trusting another CA is reissued.
    existing = _secret(**{"user.crt": cert.cert_pem, "user.key": cert.key_pem,
                          "ca.crt": rsa_ca().cert_pem})
    with pytest.raises(pytest.fail.Exception, match="reissued alice"):
        asyncio.run(user._tls_credentials(us, cs, existing, owner, logging.getLogger()))
