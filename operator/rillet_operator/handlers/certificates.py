"""A secured Cluster's certificates (pki.py does the cryptography, this the Secrets).

- The cluster CA and the clients CA are created once and never overwritten by surprise: a
  damaged CA Secret is an error condition. A generated CA is renewed (same key) `renewalDays`
  before it expires or on `rillet.io/force-renew` on its Secret (`<cluster>-cluster-ca` or
  `<cluster>-clients-ca`), and replaced (a new key) on `rillet.io/force-replace` on its
  Secret, each through the trust rollover of ca_rollover.py (the new CA trusted beside the
  old, the brokers rolled between phases). `rillet.io/renew-certificates` on the Cluster
  reissues the leaf certificates only, under the same CAs.
- The cluster CA's trusted certificates (one, or old and new during a rollover) are published
  in `<cluster>-cluster-ca-cert` for clients.
- The brokers' certificate (one for all, per-pod wildcard and bootstrap SANs) and the
  operator's are reissued when missing, unreadable, within `renewalDays` of expiry, no longer
  covering the names the brokers are dialled by, not signed by the current CA (or, the
  brokers', not carrying the current clients CA), or when the annotation
  `rillet.io/renew-certificates` gets a new value. The broker certificate's fingerprint is in
  the pod template, so a renewal rolls the brokers one at a time (handlers/rolling.py), never
  below min.insync.replicas.
"""
from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass, replace
from typing import Any

import kopf

from .. import ca_rollover, pki, rollover_users
from ..builders import broker_config as bc
from ..builders import names
from ..builders.cluster import CERT_ANNOTATION
from ..cluster_status import pod_ready
from ..kube import ApiError
from ..spec import ClusterSpec
from .common import kube

RENEW_ANNOTATION = "rillet.io/renew-certificates"


class CertificateError(Exception):
    """A certificate Secret the operator must not repair by itself (a CA); `reason` is the
    Cluster condition's."""

    def __init__(self, message: str, reason: str = "CertificateError") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Issued:
    broker_fingerprint: str
    status: dict
    operator: pki.KeyPair        # the operator's certificate, for its connection
    cluster_ca_pem: str          # every cluster CA certificate trusted now (a PEM bundle)
    # The tls Users a rollover step waits for (rollover_users.py); None: not looked at this
    # pass (a step waits for the brokers first, so the Users hold nothing yet).
    users_waiting: tuple[rollover_users.LaggingUser, ...] | None = ()


def _labels(cs: ClusterSpec) -> dict[str, str]:
    return names.labels(cs.name)


def _owned(obj: dict, cs: ClusterSpec, owner: Any) -> dict:
    obj["metadata"]["namespace"] = cs.namespace
    kopf.append_owner_reference(obj, owner=owner)
    return obj


async def _get(name: str, namespace: str) -> dict | None:
    return await asyncio.to_thread(kube().get, "Secret", name, namespace)


async def _ca(cs: ClusterSpec, secret_name: str, common_name: str, now: datetime.datetime,
              owner: Any, logger: Any) -> ca_rollover.CaState:
    """The CA as its Secret holds it now (created if missing), before any rollover step."""
    existing = await _get(secret_name, cs.namespace)
    if not cs.certificates.generate_ca:
        ca = _users_ca(existing, secret_name, now)
        warning = pki.ca_expiry_warning(ca.cert_pem, now, cs.certificates.renewal_days)
        if warning:
            kopf.warn(owner, reason="CertificateAuthorityExpiring",
                      message=f"Secret {secret_name}: {warning}")
            logger.warning("Secret %s: %s", secret_name, warning)
        return ca_rollover.CaState(ca, (ca.cert_pem,))
    if existing is not None:
        return _generated_ca(existing, secret_name)
    ca = pki.new_ca(common_name, now, cs.certificates.ca_validity_days)
    created = await asyncio.to_thread(kube().create, _owned(
        pki.ca_secret(secret_name, ca, _labels(cs)), cs, owner))
    kopf.info(owner, reason="CaCreated", message=f"created CA Secret {secret_name}")
    logger.info("created CA Secret %s", secret_name)
    # Read back as created, with its resourceVersion, which a rollover step's patch names.
    return _generated_ca(created, secret_name) if created else \
        ca_rollover.CaState(ca, (ca.cert_pem,))


def _generated_ca(secret: dict, secret_name: str) -> ca_rollover.CaState:
    try:
        return ca_rollover.read(secret)
    except (KeyError, ValueError) as exc:
        raise CertificateError(f"Secret {secret_name} does not hold a CA key and "
                               f"certificate ({exc}); restore it or delete it (a new CA "
                               f"means every client must trust the new one)") from None


async def _rollover_step(cs: ClusterSpec, secret_name: str, common_name: str,
                         state: ca_rollover.CaState, rolled: bool, now: datetime.datetime,
                         owner: Any, logger: Any) -> ca_rollover.CaState:
    """One step of a generated CA's rollover, written to its Secret (data and phase in one
    patch, so a restarted operator resumes from it)."""
    if not cs.certificates.generate_ca:
        return state
    action = ca_rollover.next_action(state, now, cs.certificates.renewal_days, rolled)
    if action in (ca_rollover.Action.NONE, ca_rollover.Action.WAIT_FOR_ROLL):
        return state
    new_ca = None
    if action is ca_rollover.Action.START_RENEWAL:
        new_ca = pki.renew_ca(state.signer, now, cs.certificates.ca_validity_days)
    elif action is ca_rollover.Action.START_REPLACEMENT:
        # Its own name, so that a peer holding both certificates tells them apart by subject.
        new_ca = pki.new_ca(f"{common_name} v{state.generation + 1}", now,
                            cs.certificates.ca_validity_days)
    after = ca_rollover.advance(state, action, new_ca)
    try:
        written = await asyncio.to_thread(kube().patch, "Secret", secret_name,
                                          ca_rollover.secret_patch(after), cs.namespace)
    except ApiError as exc:
        if exc.status != 409:
            raise
        # Changed since this pass read it (a user's request annotation, another writer): the
        # step is not taken; this pass goes on with the Secret as it is now, the next one
        # decides again from it.
        logger.info("CA Secret %s changed since it was read (conflict on resourceVersion "
                    "%s): %s not taken, retried on the next pass", secret_name,
                    state.resource_version, action.value)
        fresh = await _get(secret_name, cs.namespace)
        return _generated_ca(fresh, secret_name) if fresh is not None else state
    if written:
        after = replace(after, resource_version=str(
            (written.get("metadata") or {}).get("resourceVersion") or ""))
    message = (f"{secret_name}: {action.value} (generation {after.generation}, phase "
               f"{after.phase or 'done'}, {len(after.trusted)} trusted)")
    kopf.info(owner, reason="CaRollover", message=message)
    logger.info("CA rollover %s", message)
    return after


async def _brokers_rolled(cs: ClusterSpec, broker_secret: dict | None,
                          cluster_ca: ca_rollover.CaState,
                          clients_ca: ca_rollover.CaState) -> bool:
    """Whether every broker runs what the CAs' current phase asks: their Secret holds a
    certificate of the current signer and the current bundles, and every broker the
    StatefulSet runs has its pod, ready and carrying that certificate's fingerprint. Checking
    the Secret too keeps an operator that stopped between a CA step and the broker Secret's
    update from taking the next step."""
    current = _keypair(broker_secret)
    if current is None or not pki.issued_by(current.cert_pem, cluster_ca.signer.cert_pem) or \
            not pki.same_certificates(pki.secret_text_or_none(broker_secret, "ca.crt"),
                                      cluster_ca.bundle) or \
            not pki.same_certificates(pki.secret_text_or_none(broker_secret,
                                                              bc.CLIENTS_CA_KEY),
                                      clients_ca.bundle):
        return False
    sts = await asyncio.to_thread(kube().get, "StatefulSet", names.statefulset(cs.name),
                                  cs.namespace)
    if sts is None:
        return False
    pods = await asyncio.to_thread(kube().list, "Pod", cs.namespace,
                                   names.selector_labels(cs.name))
    # The StatefulSet's count, not spec.replicas: while a scale-down drains, the brokers that
    # go still serve (and must trust what the others present); after a scale-up is applied,
    # the new ones count before their pods exist.
    return brokers_run(pods, [names.pod(cs.name, i)
                              for i in range(int((sts.get("spec") or {}).get("replicas", 0)))],
                       pki.fingerprint(current.cert_pem))


def brokers_run(pods: list[dict], expected: list[str], fingerprint: str) -> bool:
    """Whether each pod named in `expected` is there, ready, not terminating and from the
    template carrying `fingerprint`, and no other broker pod (one still going after a
    scale-down) runs anything else. A pod deleted, or not created yet, is not current: its
    absence from the list must not count as agreement."""
    def current(pod: dict) -> bool:
        meta = pod.get("metadata") or {}
        return (meta.get("annotations") or {}).get(CERT_ANNOTATION) == fingerprint and \
            not meta.get("deletionTimestamp") and pod_ready(pod)
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    return bool(expected) and all(n in by_name for n in expected) and \
        all(current(p) for p in pods)


async def _user_secrets(cs: ClusterSpec) -> list[dict]:
    """The Secrets of the cluster's Users, found through the User resources (the operator may
    get Secrets by name; it is not given list on them)."""
    users = await asyncio.to_thread(kube().list, "User", cs.namespace)
    found = []
    for user in users:
        if (user.get("spec") or {}).get("cluster") != cs.name:
            continue
        secret = await _get(user["metadata"]["name"], cs.namespace)
        if secret is not None:
            found.append(secret)
    return found


def _users_ca(secret: dict | None, secret_name: str, now: datetime.datetime) -> pki.KeyPair:
    """The CA a user brought (generateCertificateAuthority false), or why it cannot serve."""
    where = (f"Secret {secret_name} (spec.certificates.generateCertificateAuthority is false: "
             f"the CA's key and certificate as tls.key and tls.crt, or ca.key and ca.crt)")
    if secret is None:
        raise CertificateError(f"{where} is missing", "CertificateAuthorityMissing")
    try:
        ca = pki.user_ca_keypair(secret)
    except (KeyError, ValueError) as exc:
        raise CertificateError(f"{where} lacks {exc}", "CertificateAuthorityInvalid") from None
    problem = pki.ca_problem(ca, now)
    if problem:
        raise CertificateError(f"{where} is not usable: {problem}",
                               "CertificateAuthorityInvalid")
    return ca


def _reason_to_issue(current: pki.KeyPair | None, ca: pki.KeyPair, dns_names: list[str],
                     cs: ClusterSpec, now: datetime.datetime, forced: bool,
                     carries_extra: bool = True) -> str | None:
    """Why the certificate must be (re)issued, or None to keep it. `carries_extra`: whether
    its Secret still holds what goes with it (the brokers': the current clients CA)."""
    if current is None:
        return "missing"
    if forced:
        return "renewal requested"
    if pki.needs_renewal(current.cert_pem, now, cs.certificates.renewal_days):
        return f"expires within {cs.certificates.renewal_days} days"
    if not pki.issued_by(current.cert_pem, ca.cert_pem):
        return "not signed by the current CA"
    if dns_names and not pki.covers(current.cert_pem, dns_names):
        return "does not cover the brokers' names"
    if not carries_extra:
        # A CA bundle changed (a rollover's phase, a recreated clients CA): the brokers must
        # trust what it now holds, so they roll onto it.
        return "the trusted CAs changed"
    return None


def _keypair(secret: dict | None) -> pki.KeyPair | None:
    try:
        return pki.keypair_from_secret(secret) if secret else None
    except (KeyError, ValueError):
        return None


async def _leaf(cs: ClusterSpec, secret_name: str, common_name: str, dns_names: list[str],
                ca: ca_rollover.CaState, extra: dict[str, str], now: datetime.datetime,
                forced: bool, owner: Any, logger: Any, secret: dict | None) -> pki.KeyPair:
    """`secret`: the leaf's Secret as it is now; its ca.crt is `ca`'s bundle."""
    extra = {"ca.crt": ca.bundle, **extra}
    current = _keypair(secret)
    why = _reason_to_issue(current, ca.signer, dns_names, cs, now, forced, carries_extra=all(
        pki.same_certificates(pki.secret_text_or_none(secret, k), v) for k, v in extra.items()))
    if why is None:
        assert current is not None
        return current
    issued = pki.issue_cert(ca.signer, common_name, dns_names, now,
                            cs.certificates.validity_days, client=True, server=bool(dns_names),
                            organization=names.CERT_ORGANIZATION)
    secret = pki.tls_secret(secret_name, issued, ca.bundle, _labels(cs))
    secret["data"].update({k: pki.b64(v) for k, v in extra.items()})
    if bool(dns_names):   # the broker's: its key and chain in one PEM, as ssl.keystore wants
        secret["data"][bc.KEYSTORE_KEY] = pki.b64(issued.key_pem + issued.cert_pem)
    await asyncio.to_thread(kube().apply, _owned(secret, cs, owner))
    message = f"issued {secret_name} ({why}), valid until {pki.not_after(issued.cert_pem)}"
    kopf.info(owner, reason="CertificateIssued", message=message)
    logger.info("%s", message)
    return issued


async def ensure(cs: ClusterSpec, meta: Any, status: dict, owner: Any, logger: Any,
                 external_names: list[str] | None = None) -> Issued:
    """Every certificate Secret of a secured cluster, created or renewed as needed.
    `external_names`: what clients outside dial the brokers by on TLS external listeners
    (names and addresses, listeners.certificate_names), covered beside the in-cluster names."""
    now = datetime.datetime.now(datetime.timezone.utc)
    token = (meta.get("annotations") or {}).get(RENEW_ANNOTATION)
    forced = bool(token) and token != (status.get("certificates") or {}).get("renewToken")
    names_ca = (names.cluster_ca(cs.name), f"{cs.name} cluster CA")
    names_clients = (names.clients_ca(cs.name), f"{cs.name} clients CA")
    cluster_ca = await _ca(cs, *names_ca, now, owner, logger)
    clients_ca = await _ca(cs, *names_clients, now, owner, logger)
    broker_secret = await _get(names.broker_certs(cs.name), cs.namespace)
    # Observed once, before either CA steps: each takes at most one step per pass, and the
    # next only once the brokers run the Secrets this pass writes.
    rolled = cs.certificates.generate_ca and await _brokers_rolled(cs, broker_secret,
                                                                   cluster_ca, clients_ca)
    # Two steps also wait for the tls Users (their Secrets are made on the Users' own passes;
    # one paused, refused or whose pass has not come yet would be locked out):
    # - the cluster CA's replacement signs with its new key only once every User's ca.crt
    #   trusts the new certificate, or those clients would refuse the brokers' new leaves;
    # - the clients CA's SignNew changes no broker file: before its old certificate leaves
    #   the brokers' truststores, every User certificate must be signed by the new one.
    # The Users that hold a step are named in the Cluster's condition CertificateRolloverWaiting
    # (rollover_users.py), so a paused or hand-edited one does not hold it unexplained.
    trusted_next = cluster_ca.pending.cert_pem if cluster_ca.pending and \
        cluster_ca.phase == ca_rollover.TRUST_NEW else None
    clients_waits = clients_ca.phase == ca_rollover.SIGN_NEW
    users = await _user_secrets(cs) if rolled and (trusted_next or clients_waits) else []
    not_trusting = rollover_users.not_trusting(users, trusted_next, cs.namespace) \
        if trusted_next else []
    not_signed = rollover_users.not_signed_by(users, clients_ca.signer.cert_pem,
                                              cs.namespace) if clients_waits else []
    cluster_rolled = rolled and not not_trusting
    clients_rolled = rolled and not not_signed
    # What the Cluster's condition names; None while the brokers still roll (the Users were
    # not looked at, and are not yet what holds the step).
    waiting = None if (trusted_next or clients_waits) and not rolled else \
        tuple(not_trusting + not_signed)
    cluster_ca = await _rollover_step(cs, *names_ca, cluster_ca, cluster_rolled, now, owner,
                                      logger)
    clients_ca = await _rollover_step(cs, *names_clients, clients_ca, clients_rolled, now,
                                      owner, logger)
    published = {"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": names.cluster_ca_cert(cs.name), "labels": _labels(cs)},
                 "data": {"ca.crt": pki.b64(cluster_ca.bundle)}}
    await asyncio.to_thread(kube().apply, _owned(published, cs, owner))
    broker = await _leaf(cs, names.broker_certs(cs.name), names.broker_common_name(cs.name),
                         pki.broker_sans(cs.name, cs.namespace, cs.replicas)
                         + list(external_names or ()), cluster_ca,
                         {bc.CLIENTS_CA_KEY: clients_ca.bundle}, now, forced, owner, logger,
                         broker_secret)
    operator = await _leaf(cs, names.operator_certs(cs.name),
                           names.operator_common_name(cs.name), [], cluster_ca, {}, now,
                           forced, owner, logger,
                           await _get(names.operator_certs(cs.name), cs.namespace))
    return Issued(pki.fingerprint(broker.cert_pem), {
        "clusterCaSecret": names.cluster_ca_cert(cs.name),
        "clusterCaNotAfter": _stamp(pki.not_after(cluster_ca.signer.cert_pem)),
        "clientsCaNotAfter": _stamp(pki.not_after(clients_ca.signer.cert_pem)),
        **_rollover_status("clusterCa", cluster_ca), **_rollover_status("clientsCa", clients_ca),
        "brokerNotAfter": _stamp(pki.not_after(broker.cert_pem)),
        "brokerFingerprint": pki.fingerprint(broker.cert_pem),
        "renewToken": token}, operator, cluster_ca.bundle, waiting)


def _rollover_status(prefix: str, ca: ca_rollover.CaState) -> dict:
    """Where a CA's rollover is (Idle between rollovers) and its certificate generation."""
    return {f"{prefix}Phase": ca.phase or "Idle", f"{prefix}Generation": ca.generation}


def _stamp(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
