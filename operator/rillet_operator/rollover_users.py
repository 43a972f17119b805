"""Which tls Users hold a CA rollover, and the Cluster condition that names them. Pure: the
caller passes the Users' Secrets and the time.

Two rollover steps wait for the Users (handlers/certificates.py): the cluster CA's TrustNew
until every tls User's Secret (its ca.crt) trusts the new cluster CA certificate, the clients
CA's SignNew until every User certificate is signed by the new clients CA. A User that is
paused, refused, or whose Secret was edited by hand would hold the rollover with nothing but
the phase to show for it; the condition CertificateRolloverWaiting (True, reason
WaitingForUsers) names those Users and what each lacks, and turns False (reason
NotWaitingForUsers) once nothing waits. A Cluster whose rollover never waited on a User
carries no such condition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from . import pki
from .builders import names
from .conditions import CERT_ROLLOVER_WAITING, get, set_condition

WAITING, NOT_WAITING = "WaitingForUsers", "NotWaitingForUsers"
LACKS_TRUST = "ca.crt does not trust the new cluster CA"
LACKS_SIGNATURE = "certificate not signed by the new clients CA"
# Users named in the message at most; the rest are counted ("and N more").
SHOWN = 10


@dataclass(frozen=True, order=True)
class LaggingUser:
    """A User whose Secret holds a rollover step, and what it lacks (LACKS_*)."""
    namespace: str
    name: str
    lacks: str


def of_users(secrets: Iterable[dict]) -> list[dict]:
    """The Secrets made for Users (labelled with their User), not the cluster's own."""
    return [s for s in secrets if names.LABEL_USER in _labels(s)]


def not_trusting(secrets: Iterable[dict], cert_pem: str, namespace: str) -> list[LaggingUser]:
    """The tls Users (their Secret carries a ca.crt: the cluster CA certificates the client
    trusts the brokers by) whose ca.crt does not hold `cert_pem`."""
    out = []
    for secret in of_users(secrets):
        bundle = pki.secret_text_or_none(secret, "ca.crt")
        if bundle is not None and not pki.bundle_holds(bundle, cert_pem):
            out.append(_lagging(secret, namespace, LACKS_TRUST))
    return out


def not_signed_by(secrets: Iterable[dict], signer_pem: str,
                  namespace: str) -> list[LaggingUser]:
    """The Users whose client certificate (user.crt) is not signed by `signer_pem`."""
    out = []
    for secret in of_users(secrets):
        cert = pki.secret_text_or_none(secret, "user.crt")
        if cert and not pki.issued_by(cert, signer_pem):
            out.append(_lagging(secret, namespace, LACKS_SIGNATURE))
    return out


def message(lagging: Sequence[LaggingUser], shown: int = SHOWN) -> str:
    """The Users by namespace/name, sorted, each with what it lacks (a User lagging on both
    CAs once, with both), at most `shown` of them and then how many more."""
    lacks: dict[str, list[str]] = {}
    for user in sorted(set(lagging)):
        lacks.setdefault(f"{user.namespace}/{user.name}", []).append(user.lacks)
    named = [f"{who} ({'; '.join(what)})" for who, what in sorted(lacks.items())]
    listed = ", ".join(named[:shown])
    if len(named) > shown:
        listed += f" and {len(named) - shown} more"
    return (f"the CA rollover waits for {len(named)} User{'s' if len(named) != 1 else ''}: "
            f"{listed} (a User paused, refused, or whose Secret was edited holds it until "
            f"its reconcile brings the Secret in line)")


def waiting_conditions(conditions: Iterable[dict] | None,
                       lagging: Sequence[LaggingUser] | None, now: str) -> list[dict] | None:
    """The conditions after this pass's look at the Users, or None when the condition stays
    as it is: `lagging` None (not looked at this pass: the brokers still roll, so the Users
    hold nothing yet), unchanged, or empty on a Cluster that never waited."""
    if lagging is None:
        return None
    conditions = list(conditions or [])
    held = get(conditions, CERT_ROLLOVER_WAITING)
    if lagging:
        text = message(lagging)
        if held is not None and held.get("status") == "True" and held.get("message") == text:
            return None
        return set_condition(conditions, CERT_ROLLOVER_WAITING, True, WAITING, text, now)
    if held is None or held.get("status") != "True":
        return None
    return set_condition(conditions, CERT_ROLLOVER_WAITING, False, NOT_WAITING,
                         "no CA rollover step waits for a User", now)


def _labels(secret: dict) -> dict:
    return (secret.get("metadata") or {}).get("labels") or {}


def _lagging(secret: dict, namespace: str, lacks: str) -> LaggingUser:
    meta = secret.get("metadata") or {}
    return LaggingUser(meta.get("namespace") or namespace,
                       _labels(secret).get(names.LABEL_USER) or meta.get("name") or "?", lacks)
