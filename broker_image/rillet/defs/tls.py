"""TLS settings of a listener and the names of certificate subjects, as Kafka has them.

`TlsSettings` is what a listener serving SSL is configured with (Kafka's PEM keystore and
truststore keys, ssl.client.auth) and `check` what it needs; `principal_from_subject` is
Kafka's default principal of a client certificate. Shared: the broker builds its SSL contexts
from these settings (security/tls.py) and checks them at config load, and the operator names
the principals of the certificates it issues exactly as a broker will see them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


class TlsConfigError(ValueError):
    pass


@dataclass(frozen=True)
class TlsSettings:
    """A listener's or client's ssl.* configs: where its key, chain and trusted CAs come from."""
    keystore_location: str | None = None
    keystore_key: str | None = None           # inline PEM private key
    keystore_chain: str | None = None         # inline PEM certificate chain
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None  # inline PEM CA certificates
    client_auth: str = "none"
    verify_hostname: bool = True              # ssl.endpoint.identification.algorithm=https
    keystore_type: str = "PEM"
    truststore_type: str = "PEM"

    @classmethod
    def from_config(cls, config: Any) -> "TlsSettings":
        return cls(keystore_location=config["ssl.keystore.location"] or None,
                   keystore_key=config["ssl.keystore.key"] or None,
                   keystore_chain=config["ssl.keystore.certificate.chain"] or None,
                   key_password=config["ssl.key.password"] or None,
                   truststore_location=config["ssl.truststore.location"] or None,
                   truststore_certificates=config["ssl.truststore.certificates"] or None,
                   client_auth=config["ssl.client.auth"],
                   verify_hostname=(config["ssl.endpoint.identification.algorithm"] or "")
                   .lower() == "https",
                   keystore_type=config["ssl.keystore.type"],
                   truststore_type=config["ssl.truststore.type"])

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or (self.keystore_key and self.keystore_chain))

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    def check(self) -> None:
        """What a listener serving SSL needs; raises TlsConfigError naming the missing key."""
        for key, kind in (("ssl.keystore.type", self.keystore_type),
                          ("ssl.truststore.type", self.truststore_type)):
            if kind != "PEM":
                raise TlsConfigError(f"{key}={kind}: rillet reads PEM files only")
        if self.keystore_location and (self.keystore_key or self.keystore_chain):
            raise TlsConfigError("set either ssl.keystore.location or ssl.keystore.key with "
                                 "ssl.keystore.certificate.chain, not both")
        if bool(self.keystore_key) != bool(self.keystore_chain):
            raise TlsConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go "
                                 "together")
        if not self.has_keystore:
            raise TlsConfigError("an SSL listener needs a key and certificate: "
                                 "ssl.keystore.location (PEM) or ssl.keystore.key with "
                                 "ssl.keystore.certificate.chain")
        if self.client_auth != "none" and not self.has_truststore:
            raise TlsConfigError(f"ssl.client.auth={self.client_auth} needs a truststore to "
                                 "check client certificates: ssl.truststore.location or "
                                 "ssl.truststore.certificates")

    def watched_files(self) -> list[str]:
        return [f for f in (self.keystore_location, self.truststore_location) if f]


# Subject attributes: dotted OID, the name ssl's getpeercert() reports (OpenSSL's long name),
# and Kafka's RFC 2253 keyword where it has one (an attribute without keeps its long name).
SUBJECT_ATTRIBUTES = (
    ("2.5.4.3", "commonName", "CN"),
    ("2.5.4.11", "organizationalUnitName", "OU"),
    ("2.5.4.10", "organizationName", "O"),
    ("2.5.4.7", "localityName", "L"),
    ("2.5.4.8", "stateOrProvinceName", "ST"),
    ("2.5.4.6", "countryName", "C"),
    ("2.5.4.9", "streetAddress", "STREET"),
    ("0.9.2342.19200300.100.1.25", "domainComponent", "DC"),
    ("0.9.2342.19200300.100.1.1", "userId", "UID"),
    ("1.2.840.113549.1.9.1", "emailAddress", None),
    ("2.5.4.5", "serialNumber", None),
    ("2.5.4.12", "title", None),
    ("2.5.4.42", "givenName", None),
    ("2.5.4.4", "surname", None),
)
DN_NAMES = {name: short for _, name, short in SUBJECT_ATTRIBUTES if short}
SSL_NAMES_BY_OID = {oid: name for oid, name, _ in SUBJECT_ATTRIBUTES}


def principal_from_subject(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """User:<subject DN> as Kafka prints it (RFC 2253): most specific RDN first, the
    attributes of a multi-valued RDN joined with "+", special characters escaped. `subject`
    is ssl's getpeercert() form: RDNs of (attribute name, value), least specific first."""
    rdns = ["+".join(f"{DN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in subject]
    return "User:" + ",".join(reversed(rdns))


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
