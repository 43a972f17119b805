"""The operator's certificates: CAs, broker and user certificates, and the Secrets holding them.

Like Strimzi, a Cluster gets two CAs: the cluster CA signs the brokers' certificates (server and
client, since brokers talk mTLS to each other) and is what clients trust; the clients CA signs
the certificates of Users with `tls` authentication, and is what the brokers trust for mTLS.
Keeping them apart means a user certificate can never pose as a broker.

Everything here is pure, like the builders: no API calls and no clock (callers pass `now`), and
keys and certificates travel as PEM strings in a frozen KeyPair. The only non-determinism is
what certificates need: fresh keys and random serial numbers. Whether a certificate must be
replaced is decided by `needs_renewal` (close to expiry, or unreadable) and `covers` (the DNS
names it must serve have grown beyond its SANs).
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from rillet.defs.tls import SSL_NAMES_BY_OID, principal_from_subject

from .builders import names

# Certificates start this long before `now`, so a node whose clock is a little behind the
# operator's still accepts a certificate issued a moment ago.
CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A private key (PKCS#8, unencrypted, as Kafka's PEM keystore wants it) and its
    certificate, both PEM."""
    key_pem: str
    cert_pem: str


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (e.g. datetime.now(timezone.utc))")
    return now.astimezone(timezone.utc).replace(microsecond=0)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _subject(common_name: str, organization: str | None = None) -> x509.Name:
    cn = x509.NameAttribute(NameOID.COMMON_NAME, common_name)
    if organization is None:
        return x509.Name([cn])
    # Most general first, as certificates order them; the principal reads CN=..,O=...
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization), cn])


def _key_usage(digital_signature: bool = False, cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=digital_signature, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                         key_cert_sign=cert_sign, crl_sign=cert_sign, encipher_only=False,
                         decipher_only=False)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             now: datetime, valid_days: int) -> x509.CertificateBuilder:
    if valid_days < 1:
        raise ValueError(f"valid_days must be >= 1, got {valid_days}")
    start = _aware(now)
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start - CLOCK_SKEW)
            .not_valid_after(start + timedelta(days=valid_days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False))


def new_ca(common_name: str, now: datetime, valid_days: int) -> KeyPair:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = _new_key()
    cert = (_builder(_subject(common_name), _subject(common_name), key, now, valid_days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .sign(key, hashes.SHA256()))
    return KeyPair(_key_pem(key), _cert_pem(cert))


def renew_ca(ca: KeyPair, now: datetime, valid_days: int) -> KeyPair:
    """A new certificate for an existing CA: the same key and subject, a new validity. A leaf
    either certificate signed verifies against the other (same issuer name, same key, same
    key identifier), which is what lets a renewal skip the trust-only phase."""
    key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("only an EC CA key made by the operator is renewed")
    subject = _load(ca.cert_pem).subject
    cert = (_builder(subject, subject, key, now, valid_days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .sign(key, hashes.SHA256()))
    return KeyPair(ca.key_pem, _cert_pem(cert))


def split_pems(bundle: str) -> tuple[str, ...]:
    """The certificates of a PEM bundle (a CA Secret's ca.crt during a rollover holds the
    old and the new CA), each as its own PEM text ending in a newline."""
    end = "-----END CERTIFICATE-----"
    return tuple(part.strip() + "\n" + end + "\n" for part in bundle.split(end)
                 if "-----BEGIN CERTIFICATE-----" in part)


def join_pems(certs: Iterable[str]) -> str:
    """One PEM bundle, each certificate once, in the order given."""
    return "".join(dict.fromkeys(c if c.endswith("\n") else c + "\n" for c in certs))


_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----",
                              re.DOTALL)


def _certificate_bodies(text: str) -> tuple[str, ...]:
    """The base64 bodies of the certificates in a PEM text, in order, without whitespace."""
    return tuple("".join(body.split()) for body in _PEM_CERTIFICATE.findall(text))


def same_certificates(a: str | None, b: str | None) -> bool:
    """Whether two PEM texts hold the same certificates in the same order, whatever the
    whitespace between and around them (a CA a user brought often lacks the final newline
    the operator's bundles end in). What a Secret holds is compared with what the operator
    would write through this, never as text: a difference in layout alone must not reissue a
    certificate, which rolls the brokers. None (a missing entry) equals only None."""
    if a is None or b is None:
        return a is b
    bodies = _certificate_bodies(a)
    return bodies == _certificate_bodies(b) and (bool(bodies) or a.strip() == b.strip())


def bundle_holds(bundle: str | None, cert_pem: str) -> bool:
    """Whether a PEM bundle (a Secret's ca.crt) holds the certificate, whatever the layout."""
    wanted = _certificate_bodies(cert_pem)
    return bool(bundle) and bool(wanted) and wanted[0] in _certificate_bodies(bundle or "")


def _extended_key_usage(client: bool, server: bool) -> x509.ExtendedKeyUsage:
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
             ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    if not usages:
        raise ValueError("a certificate must be for a client, a server or both")
    return x509.ExtendedKeyUsage(usages)


def issue_cert(ca: KeyPair, common_name: str, dns_names: list[str], now: datetime,
               valid_days: int, client: bool, server: bool,
               organization: str | None = None) -> KeyPair:
    """A leaf certificate signed by `ca`. Brokers: server and client, their DNS names from
    broker_sans. Users with tls authentication: client only, no DNS names, CN = user name."""
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    if not isinstance(ca_key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise ValueError("the CA key must be an EC or RSA key")
    key = _new_key()
    builder = (_builder(_subject(common_name, organization), ca_cert.subject, key, now,
                        valid_days)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_key_usage(digital_signature=True), critical=True)
               .add_extension(_extended_key_usage(client, server), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_cert.public_key()), critical=False))
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in dns_names]), critical=False)
    return KeyPair(_key_pem(key), _cert_pem(builder.sign(ca_key, hashes.SHA256())))


def _general_name(name: str) -> x509.GeneralName:
    """An address as an IP SAN (what a TLS client checks an address it dialled against), any
    other name as a DNS SAN."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def broker_sans(cluster: str, namespace: str, replicas: int,
                cluster_domain: str = names.CLUSTER_DOMAIN) -> list[str]:
    """Every DNS name a broker is dialled by: its own per-pod name, the bootstrap Service's,
    and a wildcard over the headless Service, so brokers added later are covered too. One
    certificate serves all the brokers of a cluster."""
    headless = f"{names.headless_service(cluster)}.{namespace}.svc"
    bootstrap = names.bootstrap_service(cluster)
    sans = {bootstrap, f"{bootstrap}.{namespace}", f"{bootstrap}.{namespace}.svc",
            f"{bootstrap}.{namespace}.svc.{cluster_domain}",
            f"*.{headless}", f"*.{headless}.{cluster_domain}"}
    for ordinal in range(replicas):
        pod = names.pod(cluster, ordinal)
        sans |= {f"{pod}.{headless}", f"{pod}.{headless}.{cluster_domain}"}
    return sorted(sans)


def _load(cert_pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(cert_pem.encode())


def not_after(cert_pem: str) -> datetime:
    """When the certificate expires (UTC)."""
    return _load(cert_pem).not_valid_after_utc


def needs_renewal(cert_pem: str, now: datetime, renew_before_days: int) -> bool:
    """True from `renew_before_days` before expiry on, and for anything that is not a readable
    certificate (a damaged Secret is replaced rather than served)."""
    try:
        expiry = not_after(cert_pem)
    except (ValueError, TypeError, AttributeError):
        return True
    return _aware(now) >= expiry - timedelta(days=renew_before_days)


def issued_by(cert_pem: str, ca_cert_pem: str) -> bool:
    """Whether `ca_cert_pem` signed the certificate (False if either is unreadable): a leaf
    left from a replaced CA is reissued."""
    try:
        _load(cert_pem).verify_directly_issued_by(_load(ca_cert_pem))
        return True
    except (ValueError, TypeError, AttributeError, InvalidSignature):
        return False


def fingerprint(cert_pem: str) -> str:
    """A short stable digest of a certificate, e.g. for a pod template annotation."""
    return hashlib.sha256(cert_pem.encode()).hexdigest()[:16]


def _dns_names(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {n.lower() for n in san.get_values_for_type(x509.DNSName)} | {
        str(a) for a in san.get_values_for_type(x509.IPAddress)}


def _matches(name: str, sans: set[str]) -> bool:
    """As a TLS client checks a host name: exactly, or by a `*` standing for the whole
    leftmost label."""
    name = name.lower()
    if name in sans:
        return True
    label, _, rest = name.partition(".")
    return bool(label and rest and label != "*" and f"*.{rest}" in sans)


def covers(cert_pem: str, dns_names: Iterable[str]) -> bool:
    """Whether the certificate serves every one of `dns_names` (False if unreadable): when the
    names a cluster needs grow beyond it, the certificate is reissued."""
    try:
        sans = _dns_names(_load(cert_pem))
    except (ValueError, TypeError, AttributeError):
        return False
    return all(_matches(n, sans) for n in dns_names)


def _attribute_name(oid: x509.ObjectIdentifier) -> str:
    # The name ssl would report, so that principal_from_subject shortens it as the broker does.
    return SSL_NAMES_BY_OID.get(oid.dotted_string, oid.dotted_string)


def principal_of(cert_pem: str) -> str:
    """The principal rillet's broker gives a client presenting this certificate, as ACLs and
    super.users name it: `User:` and the subject DN, most specific RDN first
    (User:CN=alice,O=acme), the same string as rillet.security.tls.peer_principal."""
    return principal_from_subject([[(_attribute_name(a.oid), str(a.value)) for a in rdn]
                                   for rdn in _load(cert_pem).subject.rdns])


def b64(text: str) -> str:
    """A Secret data value."""
    return base64.b64encode(text.encode()).decode()


def tls_secret(name: str, keypair: KeyPair, ca_cert_pem: str,
               labels: Mapping[str, str] | None = None) -> dict:
    """A kubernetes.io/tls Secret: tls.key, tls.crt and the issuing CA's ca.crt. The namespace
    and owner come from the handler (kopf.adopt), as for the builders."""
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": metadata,
            "data": {"tls.key": b64(keypair.key_pem), "tls.crt": b64(keypair.cert_pem),
                     "ca.crt": b64(ca_cert_pem)}}


def ca_secret(name: str, keypair: KeyPair, labels: Mapping[str, str] | None = None) -> dict:
    """A CA's Secret: its key and certificate, ca.crt being the certificate itself."""
    return tls_secret(name, keypair, keypair.cert_pem, labels)


def secret_text(secret: Mapping, key: str) -> str:
    """One PEM entry of a Secret's data (KeyError if missing)."""
    return base64.b64decode((secret.get("data") or {})[key]).decode()


def secret_text_or_none(secret: Mapping | None, key: str) -> str | None:
    """secret_text, or None when the Secret, the entry or its encoding is missing."""
    try:
        return secret_text(secret or {}, key)
    except (KeyError, ValueError):
        return None


def user_ca_keypair(secret: Mapping) -> KeyPair:
    """A CA a user brought (spec.certificates.generateCertificateAuthority false): its key
    and certificate as tls.key/tls.crt, or as Strimzi names them, ca.key/ca.crt (KeyError if
    neither pair is there)."""
    data = secret.get("data") or {}
    if "tls.key" in data:
        return keypair_from_secret(secret)
    return KeyPair(secret_text(secret, "ca.key"), secret_text(secret, "ca.crt"))


def ca_problem(keypair: KeyPair, now: datetime) -> str | None:
    """What keeps a CA a user brought from signing the cluster's certificates, or None: an
    unreadable key or certificate, a key that is not the certificate's, a certificate that is
    no CA (basicConstraints, keyCertSign), or one outside its validity."""
    try:
        cert = _load(keypair.cert_pem)
    except ValueError:
        return "its certificate is not a PEM X.509 certificate"
    try:
        key = serialization.load_pem_private_key(keypair.key_pem.encode(), password=None)
    except (ValueError, TypeError):
        return "its key is not an unencrypted PEM private key"
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        return "its key is neither EC nor RSA"
    if key.public_key().public_numbers() != cert.public_key().public_numbers():
        return "its key does not belong to its certificate"
    try:
        if not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return "its certificate is not a CA (basicConstraints CA:FALSE)"
    except x509.ExtensionNotFound:
        return "its certificate is not a CA (no basicConstraints)"
    try:
        if not cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign:
            return "its certificate may not sign certificates (keyUsage without keyCertSign)"
    except x509.ExtensionNotFound:
        pass
    now = _aware(now)
    if now < cert.not_valid_before_utc:
        return f"its certificate is not valid before {cert.not_valid_before_utc:%Y-%m-%d}"
    if now >= cert.not_valid_after_utc:
        return f"its certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}"
    return None


def ca_expiry_warning(cert_pem: str, now: datetime, renew_before_days: int) -> str | None:
    """A still-valid CA a user brought that expires within renewalDays: the operator cannot
    renew it (its key is the user's), so it says so and keeps serving, as Strimzi does;
    refusing it would stop every reconcile while the certificates still work."""
    not_after = _load(cert_pem).not_valid_after_utc
    if _aware(now) >= not_after - timedelta(days=renew_before_days):
        return (f"its certificate expires on {not_after:%Y-%m-%d}, within renewalDays "
                f"({renew_before_days}): replace the Secret's CA before then")
    return None


def keypair_from_secret(secret: Mapping) -> KeyPair:
    """The KeyPair back out of a Secret built by tls_secret (KeyError if a key is missing)."""
    return KeyPair(secret_text(secret, "tls.key"), secret_text(secret, "tls.crt"))
