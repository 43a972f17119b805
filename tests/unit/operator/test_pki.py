"""The operator's certificates: what TLS clients, brokers and ACLs will make of them. TLS is
checked in memory (ssl.MemoryBIO pairs, no sockets)."""
from __future__ import annotations

import base64
import ssl
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rillet.defs.tls import SUBJECT_ATTRIBUTES
from rillet.security.tls import peer_principal
from rillet_operator import pki
from rillet_operator.builders import names

# pki itself never reads the clock, but OpenSSL checks validity against the real one during
# the in-memory handshakes: certificates are issued as of the moment the tests start.
NOW = datetime.now(timezone.utc).replace(microsecond=0)
SANS = pki.broker_sans("events", "prod", 3)


@pytest.fixture(scope="module")
def cluster_ca() -> pki.KeyPair:
    return pki.new_ca("rillet-events-cluster-ca", NOW, 365)


@pytest.fixture(scope="module")
def clients_ca() -> pki.KeyPair:
    return pki.new_ca("rillet-events-clients-ca", NOW, 365)


@pytest.fixture(scope="module")
def broker(cluster_ca) -> pki.KeyPair:
    return pki.issue_cert(cluster_ca, names.statefulset("events"), SANS, NOW, 90,
                          client=True, server=True)


@pytest.fixture(scope="module")
def user(clients_ca) -> pki.KeyPair:
    return pki.issue_cert(clients_ca, "alice", [], NOW, 90, client=True, server=False)


def load(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def eku(pem: str) -> set:
    return set(load(pem).extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


# --- TLS in memory -------------------------------------------------------------------------

def server_context(keypair: pki.KeyPair, tmp_path, client_ca: str | None = None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    path = tmp_path / "keystore.pem"
    path.write_text(keypair.key_pem + keypair.cert_pem)
    ctx.load_cert_chain(str(path))
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=client_ca)
    return ctx


def client_context(ca_pem: str, tmp_path, keypair: pki.KeyPair | None = None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)   # check_hostname and CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT      # Python 3.13's default for clients
    ctx.load_verify_locations(cadata=ca_pem)
    if keypair:
        path = tmp_path / "client.pem"
        path.write_text(keypair.key_pem + keypair.cert_pem)
        ctx.load_cert_chain(str(path))
    return ctx


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str):
    """Drives both ends until both are done; returns the server's SSLObject."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for side, obj in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return server
    raise AssertionError("handshake did not finish")


# --- CA and signatures ---------------------------------------------------------------------

def test_ca_is_a_ca_that_signs_certificates_only(cluster_ca):
    cert = load(cluster_ca.cert_pem)
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign and not ku.digital_signature
    assert cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    cert.verify_directly_issued_by(cert)   # self-signed


def test_broker_cert_verifies_against_its_ca_only(cluster_ca, clients_ca, broker):
    cert = load(broker.cert_pem)
    cert.verify_directly_issued_by(load(cluster_ca.cert_pem))
    with pytest.raises(ValueError):     # another CA's name
        cert.verify_directly_issued_by(load(clients_ca.cert_pem))
    impostor = pki.new_ca("rillet-events-cluster-ca", NOW, 365)   # same name, other key
    with pytest.raises(InvalidSignature):
        cert.verify_directly_issued_by(load(impostor.cert_pem))
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ski = load(cluster_ca.cert_pem).extensions.get_extension_for_class(
        x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest


def test_broker_cert_is_for_servers_and_clients_user_cert_for_clients_only(broker, user):
    assert eku(broker.cert_pem) == {ExtendedKeyUsageOID.SERVER_AUTH,
                                    ExtendedKeyUsageOID.CLIENT_AUTH}
    assert eku(user.cert_pem) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    assert load(user.cert_pem).subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value \
        == "alice"
    ku = load(user.cert_pem).extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.digital_signature and not ku.key_cert_sign


def test_tls_client_refuses_a_user_cert_posing_as_a_server(clients_ca, tmp_path):
    user_with_name = pki.issue_cert(clients_ca, "alice", ["events-bootstrap"], NOW, 1,
                                    client=True, server=False)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate purpose"):
        handshake(server_context(user_with_name, tmp_path),
                  client_context(clients_ca.cert_pem, tmp_path), "events-bootstrap")


def test_a_certificate_must_have_a_use(cluster_ca):
    with pytest.raises(ValueError):
        pki.issue_cert(cluster_ca, "x", [], NOW, 1, client=False, server=False)


def test_now_must_be_timezone_aware():
    with pytest.raises(ValueError):
        pki.new_ca("ca", datetime(2025, 1, 1), 1)


# --- Names ---------------------------------------------------------------------------------

def test_broker_sans_cover_every_pod_and_the_bootstrap_service():
    for ordinal in range(3):
        assert names.pod_fqdn("events", "prod", ordinal) in SANS
        assert f"events-broker-{ordinal}.events-brokers.prod.svc" in SANS
    for name in ("events-bootstrap", "events-bootstrap.prod", "events-bootstrap.prod.svc",
                 "events-bootstrap.prod.svc.cluster.local",
                 "*.events-brokers.prod.svc", "*.events-brokers.prod.svc.cluster.local"):
        assert name in SANS
    assert SANS == sorted(set(SANS)) and len(SANS) == 12
    assert names.bootstrap_address("events", "prod").rsplit(":", 1)[0] in SANS


def test_broker_sans_use_the_given_cluster_domain():
    sans = pki.broker_sans("events", "prod", 1, cluster_domain="k8s.example")
    assert "events-broker-0.events-brokers.prod.svc.k8s.example" in sans
    assert not any(s.endswith("cluster.local") for s in sans)


@pytest.mark.parametrize("hostname", [names.pod_fqdn("events", "prod", 1),
                                      "events-broker-2.events-brokers.prod.svc",
                                      "events-bootstrap.prod.svc.cluster.local",
                                      "events-bootstrap"])
def test_tls_client_accepts_broker_cert_for_its_names(cluster_ca, broker, hostname, tmp_path):
    server = handshake(server_context(broker, tmp_path),
                       client_context(cluster_ca.cert_pem, tmp_path), hostname)
    assert server.version() is not None


def test_tls_client_accepts_a_pod_added_later_through_the_wildcard(cluster_ca, broker,
                                                                   tmp_path):
    handshake(server_context(broker, tmp_path), client_context(cluster_ca.cert_pem, tmp_path),
              names.pod_fqdn("events", "prod", 7))


@pytest.mark.parametrize("hostname", ["events-broker-0.events-brokers.staging.svc",
                                      "other-bootstrap.prod.svc.cluster.local",
                                      "a.events-broker-0.events-brokers.prod.svc"])
def test_tls_client_refuses_broker_cert_for_other_names(cluster_ca, broker, hostname,
                                                        tmp_path):
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(server_context(broker, tmp_path),
                  client_context(cluster_ca.cert_pem, tmp_path), hostname)


def test_tls_client_trusting_another_ca_refuses_broker_cert(clients_ca, broker, tmp_path):
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(server_context(broker, tmp_path),
                  client_context(clients_ca.cert_pem, tmp_path), "events-bootstrap")


def test_covers_uses_wildcards_as_tls_does_and_misses_other_namespaces(broker):
    assert pki.covers(broker.cert_pem, SANS)
    assert pki.covers(broker.cert_pem, pki.broker_sans("events", "prod", 9))
    assert pki.covers(broker.cert_pem, ["EVENTS-BOOTSTRAP.prod.svc"])
    assert not pki.covers(broker.cert_pem, pki.broker_sans("events", "staging", 3))
    assert not pki.covers(broker.cert_pem, SANS + ["events-bootstrap.prod.svc.k8s.example"])
    assert not pki.covers(broker.cert_pem, ["a.events-broker-0.events-brokers.prod.svc"])
    assert not pki.covers("garbage", ["events-bootstrap"])


def test_covers_without_a_wildcard_needs_each_pod_name(cluster_ca):
    two = [names.pod_fqdn("events", "prod", i) for i in range(2)]
    cert = pki.issue_cert(cluster_ca, "b", two, NOW, 1, client=True, server=True)
    assert pki.covers(cert.cert_pem, two)
    assert not pki.covers(cert.cert_pem, two + [names.pod_fqdn("events", "prod", 2)])


# --- Renewal -------------------------------------------------------------------------------

def test_not_after_is_now_plus_validity(broker, cluster_ca):
    assert pki.not_after(broker.cert_pem) == NOW + timedelta(days=90)
    assert pki.not_after(cluster_ca.cert_pem) == NOW + timedelta(days=365)
    assert load(broker.cert_pem).not_valid_before_utc <= NOW


def test_needs_renewal_from_renew_before_days_ahead_of_expiry(broker):
    point = NOW + timedelta(days=90 - 30)
    second = timedelta(seconds=1)
    assert not pki.needs_renewal(broker.cert_pem, NOW, 30)
    assert not pki.needs_renewal(broker.cert_pem, point - second, 30)
    assert pki.needs_renewal(broker.cert_pem, point, 30)
    assert pki.needs_renewal(broker.cert_pem, point + second, 30)
    assert pki.needs_renewal(broker.cert_pem, NOW + timedelta(days=91), 30)


@pytest.mark.parametrize("pem", ["", "garbage", "-----BEGIN CERTIFICATE-----\nAAAA\n"
                                                "-----END CERTIFICATE-----\n", None])
def test_unreadable_certificate_needs_renewal(pem):
    assert pki.needs_renewal(pem, NOW, 30)


# --- Principals ----------------------------------------------------------------------------

def cert_with_subject(ca: pki.KeyPair, attributes: list) -> pki.KeyPair:
    """A client certificate with any subject, built here because issue_cert sets CN only."""
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), None)
    ca_cert = load(ca.cert_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name(attributes)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - timedelta(days=1)).not_valid_after(NOW + timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_cert.public_key()), False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return pki.KeyPair(key_pem, cert.public_bytes(serialization.Encoding.PEM).decode())


def brokers_principal(cluster_ca, clients_ca, broker, client: pki.KeyPair, tmp_path) -> str:
    """What rillet's broker makes of `client` over mTLS: its own peer_principal, on the
    server's end of an in-memory handshake (the broker trusts the clients CA, the client the
    cluster CA)."""
    server = handshake(server_context(broker, tmp_path, client_ca=clients_ca.cert_pem),
                       client_context(cluster_ca.cert_pem, tmp_path, keypair=client),
                       "events-bootstrap")
    return peer_principal(server)


def test_principal_of_user_cert_is_what_the_broker_sees(cluster_ca, clients_ca, broker, user,
                                                         tmp_path):
    assert pki.principal_of(user.cert_pem) == "User:CN=alice"
    assert brokers_principal(cluster_ca, clients_ca, broker, user, tmp_path) == "User:CN=alice"


def test_principal_of_cn_and_o_most_specific_first(cluster_ca, clients_ca, broker, tmp_path):
    client = cert_with_subject(clients_ca, [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Data"),
        x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    expected = "User:CN=alice,OU=Data,O=Acme,C=DE"
    assert pki.principal_of(client.cert_pem) == expected
    assert brokers_principal(cluster_ca, clients_ca, broker, client, tmp_path) == expected


def test_principal_of_escapes_as_the_broker_does(cluster_ca, clients_ca, broker, tmp_path):
    client = cert_with_subject(clients_ca, [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "ops@acme.example"),
        x509.NameAttribute(NameOID.COMMON_NAME, " #svc+1 ")])
    principal = pki.principal_of(client.cert_pem)
    assert principal == r"User:CN=\ #svc\+1\ ,emailAddress=ops@acme.example,O=Acme\, Inc."
    assert brokers_principal(cluster_ca, clients_ca, broker, client, tmp_path) == principal


def test_principal_of_multi_valued_rdn_matches_the_broker(cluster_ca, clients_ca, broker,
                                                          tmp_path):
    """The attributes of one RDN are joined with "+", as in Kafka's RFC 2253 form, by the
    broker and by principal_of alike."""
    client = cert_with_subject(clients_ca, [
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                                        x509.NameAttribute(NameOID.USER_ID, "42")])])
    principal = pki.principal_of(client.cert_pem)
    assert brokers_principal(cluster_ca, clients_ca, broker, client, tmp_path) == principal
    assert principal in ("User:CN=alice+UID=42,O=Acme", "User:UID=42+CN=alice,O=Acme")


def test_principal_of_names_every_known_attribute_as_the_broker_does(cluster_ca, clients_ca,
                                                                     broker, tmp_path):
    """The one attribute table (rillet.defs.tls.SUBJECT_ATTRIBUTES) holds for each OID the
    name ssl reports: principal_of agrees with the broker on a subject using all of them."""
    client = cert_with_subject(clients_ca, [
        x509.NameAttribute(x509.ObjectIdentifier(oid), "DE" if short == "C" else f"v-{name}")
        for oid, name, short in SUBJECT_ATTRIBUTES])
    principal = pki.principal_of(client.cert_pem)
    assert brokers_principal(cluster_ca, clients_ca, broker, client, tmp_path) == principal
    assert principal.startswith("User:surname=v-surname,givenName=v-givenName,title=v-title,")
    assert principal.endswith(",UID=v-userId,DC=v-domainComponent,STREET=v-streetAddress,C=DE,"
                              "ST=v-stateOrProvinceName,L=v-localityName,O=v-organizationName,"
                              "OU=v-organizationalUnitName,CN=v-commonName")


def test_broker_refuses_a_client_cert_from_the_cluster_ca(cluster_ca, clients_ca, broker,
                                                          tmp_path):
    """The two CAs are kept apart: only the clients CA vouches for users."""
    stray = pki.issue_cert(cluster_ca, "mallory", [], NOW, 1, client=True, server=False)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        brokers_principal(cluster_ca, clients_ca, broker, stray, tmp_path)


# --- Secrets -------------------------------------------------------------------------------

def test_ca_secret_is_a_tls_secret_whose_data_decodes_back(cluster_ca):
    secret = pki.ca_secret("events-cluster-ca", cluster_ca, labels=names.labels("events"))
    assert secret["apiVersion"] == "v1" and secret["kind"] == "Secret"
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {"name": "events-cluster-ca", "labels": names.labels("events")}
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {"tls.key": cluster_ca.key_pem, "tls.crt": cluster_ca.cert_pem,
                    "ca.crt": cluster_ca.cert_pem}
    assert pki.keypair_from_secret(secret) == cluster_ca


def test_leaf_secret_carries_the_issuing_ca(cluster_ca, broker):
    secret = pki.tls_secret("events-broker-certs", broker, cluster_ca.cert_pem)
    assert base64.b64decode(secret["data"]["ca.crt"]).decode() == cluster_ca.cert_pem
    assert pki.keypair_from_secret(secret) == broker
    assert "labels" not in secret["metadata"]


# --- comparing PEM texts ------------------------------------------------------------------

def test_equal_certificates_compare_equal_whatever_their_layout(cluster_ca, clients_ca):
    """A CA a user brought may lack the trailing newline, end in CRLF or blank lines: the same
    certificates are the same trust (else a Secret is rewritten and the brokers roll)."""
    a, b = cluster_ca.cert_pem, clients_ca.cert_pem
    bundle = pki.join_pems((a, b))
    assert pki.same_certificates(a.rstrip("\n"), a)
    assert pki.same_certificates(a.replace("\n", "\r\n") + "\n\n", pki.join_pems((a,)))
    assert pki.same_certificates(a.rstrip() + b, bundle)
    # ... and only the same certificates, in the same order.
    assert not pki.same_certificates(a, b)
    assert not pki.same_certificates(a, bundle)
    assert not pki.same_certificates(pki.join_pems((b, a)), bundle)
    assert not pki.same_certificates(None, a) and pki.same_certificates(None, None)
    assert pki.bundle_holds(a.rstrip() + "\r\n" + b.rstrip(), b)
    assert not pki.bundle_holds(a, b) and not pki.bundle_holds(None, b)
