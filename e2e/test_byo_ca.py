"""e2e: a Cluster with its own CAs (spec.certificates.generateCertificateAuthority false).
Without the CA Secrets it says CertificateAuthorityMissing and starts no broker; with a key
that is not its certificate's, CertificateAuthorityInvalid; with a good RSA CA (made here, as
a company PKI hands one over, named ca.key/ca.crt as Strimzi users do) it becomes Ready, the
brokers serve certificates signed by it, and a client outside Kubernetes that trusts only that
CA produces and consumes over a TLS nodeport listener."""
from __future__ import annotations

import base64
import time
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from localk8s.kube import Kube
from test_external_listeners import TOPIC, _nodes_reachable, _roundtrip_confluent
from test_operator import _debug, condition, get_cr, operator  # noqa: F401
from test_security import _apply, _wait_ready
from test_storage_growth import ns  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(1200)

CLUSTER = "byo"


def _rsa_ca(name: str) -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=730))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode(),
            cert.public_bytes(serialization.Encoding.PEM).decode())


def _ca_secret(kube: Kube, ns: str, name: str, key: str, cert: str) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "data": {"ca.key": base64.b64encode(key.encode()).decode(),
                     "ca.crt": base64.b64encode(cert.encode()).decode()}}
    if kube.get_or_none("Secret", name, ns) is None:
        kube.create(body)
    else:
        kube.request("PUT", f"/api/v1/namespaces/{ns}/secrets/{name}", body)


def _wait_refused(kube: Kube, ns: str, reason: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = condition(get_cr(kube, ns, "clusters", CLUSTER))
        if ready.get("reason") == reason:
            return ready
        time.sleep(2)
    pytest.fail(f"no Ready reason {reason}: {_debug(kube, ns)}")


@pytest.fixture
def reachable(k8s) -> None:
    if not all(a.startswith("198.19.255.") for a in _nodes_reachable(k8s.kube)):
        pytest.skip("the nodes' addresses are not on this machine's kind network")


def test_a_cluster_with_its_own_ca(k8s, reachable, ns, tmp_path):
    kube = k8s.kube
    _apply(kube, ns, "clusters", "Cluster", CLUSTER, {
        "replicas": 1, "storage": {"type": "ephemeral"},
        "certificates": {"generateCertificateAuthority": False},
        "listeners": [{"name": "tls", "port": 9094, "type": "nodeport", "tls": True}]})
    missing = _wait_refused(kube, ns, "CertificateAuthorityMissing")
    assert f"Secret {CLUSTER}-cluster-ca" in missing["message"], missing
    assert kube.get_or_none("StatefulSet", f"{CLUSTER}-broker", ns) is None
    cluster_key, cluster_cert = _rsa_ca("acme cluster CA")
    clients_key, clients_cert = _rsa_ca("acme clients CA")
    # A key that is not the certificate's.
    _ca_secret(kube, ns, f"{CLUSTER}-cluster-ca", clients_key, cluster_cert)
    _ca_secret(kube, ns, f"{CLUSTER}-clients-ca", clients_key, clients_cert)
    invalid = _wait_refused(kube, ns, "CertificateAuthorityInvalid")
    assert "does not belong to its certificate" in invalid["message"], invalid
    _ca_secret(kube, ns, f"{CLUSTER}-cluster-ca", cluster_key, cluster_cert)
    _wait_ready(k8s, ns, f"cluster.rillet.io/{CLUSTER}", 600)
    published = base64.b64decode(kube.get("Secret", f"{CLUSTER}-cluster-ca-cert", ns)["data"][
        "ca.crt"]).decode()
    assert published == cluster_cert
    # The operator took the Secrets as they are: not replaced, not owned.
    secret = kube.get("Secret", f"{CLUSTER}-cluster-ca", ns)
    assert base64.b64decode(secret["data"]["ca.crt"]).decode() == cluster_cert
    assert not secret["metadata"].get("ownerReferences")
    _apply(kube, ns, "topics", "Topic", TOPIC, {"cluster": CLUSTER, "partitions": 1,
                                                "replicas": 1})
    _wait_ready(k8s, ns, f"topic.rillet.io/{TOPIC}")
    ca = tmp_path / "acme.crt"
    ca.write_text(cluster_cert)
    listener = next(l for l in get_cr(kube, ns, "clusters", CLUSTER)["status"]["listeners"]
                    if l["name"] == "tls")
    brokers = _roundtrip_confluent(listener["bootstrapServers"], "byo", **{
        "security.protocol": "SSL", "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https"})
    assert len(brokers) == 1
