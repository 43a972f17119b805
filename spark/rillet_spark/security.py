"""Connecting the Kafka source to a secured rillet Cluster with a `User` the operator made.

The operator keeps a User's credentials in a Secret named after it, and the Cluster's CA in
`<cluster>-cluster-ca-cert`. Mounted as folders (in the driver and every executor: the Kafka
source opens consumers on both), they are all the job needs:

- a SCRAM-SHA-512 user's Secret holds `password` and `sasl.jaas.config`: the job connects over
  SASL_SSL;
- a TLS user's Secret holds `user.crt`, `user.key`, `user.pem` (PKCS#8 key + certificate, the
  PEM keystore Kafka's clients read) and `ca.crt`: the job connects over SSL with the
  certificate (mutual TLS).

The password never reaches Spark: `sasl.jaas.config` is a reference that Kafka's own
DirectoryConfigProvider resolves inside each consumer from the mounted file, so it appears in
no Spark option, plan, event log or command line. The sample producer (librdkafka, which has
no config provider) reads the same files itself: `librdkafka_options`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SCRAM_MECHANISM = "SCRAM-SHA-512"
JAAS_FILE = "sasl.jaas.config"
PASSWORD_FILE = "password"
KEYSTORE_FILE = "user.pem"
CERT_FILE, KEY_FILE = "user.crt", "user.key"
USER_CA_FILE = "ca.crt"
_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


class SecurityConfigError(ValueError):
    """The mounted Secret is not one the operator makes; says which file is missing."""


@dataclass(frozen=True)
class ClientSecurity:
    """Where the mounted credentials are; None means plaintext."""

    user_dir: Path | None = None
    ca_file: Path | None = None


@dataclass(frozen=True)
class _Mounted:
    """What a ClientSecurity points at: `kind` is "plain", "ca" (server-authenticated TLS),
    "scram" or "tls"; the CA is the one given or, for a tls User, its Secret's own ca.crt."""

    kind: str
    user_dir: Path
    ca_file: Path | None


def _mounted(sec: ClientSecurity) -> _Mounted:
    if sec.user_dir is None:
        return _Mounted("plain" if sec.ca_file is None else "ca", Path(), sec.ca_file)
    ca_file = sec.ca_file or _default_ca(sec.user_dir)
    if (sec.user_dir / JAAS_FILE).is_file():
        return _Mounted("scram", sec.user_dir, ca_file)
    if (sec.user_dir / KEYSTORE_FILE).is_file():
        return _Mounted("tls", sec.user_dir, ca_file)
    raise SecurityConfigError(
        f"{sec.user_dir} holds neither {JAAS_FILE} (a scram-sha-512 User's Secret) nor "
        f"{KEYSTORE_FILE} (a tls User's Secret): mount the Secret the operator made for the User")


def kafka_options(sec: ClientSecurity) -> dict[str, str]:
    """Consumer settings (without the `kafka.` prefix) for the Kafka source."""
    m = _mounted(sec)
    if m.kind == "plain":
        return {}
    trust = _truststore(m.ca_file)
    if m.kind == "scram":
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            # Resolved by the consumer itself from the file; see the module's docstring.
            "config.providers": "rilletuser",
            "config.providers.rilletuser.class": _PROVIDER,
            "sasl.jaas.config": f"${{rilletuser:{m.user_dir}:{JAAS_FILE}}}",
            **trust,
        }
    if m.kind == "tls":
        return {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(m.user_dir / KEYSTORE_FILE), **trust}
    return {"security.protocol": "SSL", **trust}


def librdkafka_options(sec: ClientSecurity) -> dict[str, str]:
    """The same mounted Secret for a librdkafka client (the sample producer, confluent-kafka).

    librdkafka has no config provider, so the SCRAM password is read from the mounted file here
    and only ever held in the client's memory; the user name comes from the Secret's
    sasl.jaas.config, which the operator writes as `username="..." password="..."`."""
    m = _mounted(sec)
    if m.kind == "plain":
        return {}
    trust = {"ssl.ca.location": _truststore(m.ca_file)["ssl.truststore.location"]}
    if m.kind == "scram":
        return {"security.protocol": "SASL_SSL", "sasl.mechanisms": SCRAM_MECHANISM,
                "sasl.username": _jaas_username(m.user_dir / JAAS_FILE),
                "sasl.password": _read_secret_file(m.user_dir / PASSWORD_FILE), **trust}
    if m.kind == "tls":
        return {"security.protocol": "SSL", "ssl.certificate.location": str(m.user_dir / CERT_FILE),
                "ssl.key.location": str(m.user_dir / KEY_FILE), **trust}
    return {"security.protocol": "SSL", **trust}


def _jaas_username(path: Path) -> str:
    found = re.search(r'username="([^"]+)"', path.read_text())
    if not found:
        raise SecurityConfigError(f"{path} names no username=\"...\"")
    return found.group(1)


def _read_secret_file(path: Path) -> str:
    if not path.is_file():
        raise SecurityConfigError(f"{path} is missing from the mounted User Secret")
    return path.read_text().strip()


def _default_ca(user_dir: Path) -> Path | None:
    ca = user_dir / USER_CA_FILE
    return ca if ca.is_file() else None


def _truststore(ca_file: Path | None) -> dict[str, str]:
    if ca_file is None:
        raise SecurityConfigError(
            "TLS needs the Cluster's CA: mount the <cluster>-cluster-ca-cert Secret and pass "
            "--ca-file (a tls User's Secret carries ca.crt itself)")
    if not ca_file.is_file():
        raise SecurityConfigError(f"CA file {ca_file} does not exist")
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file)}
