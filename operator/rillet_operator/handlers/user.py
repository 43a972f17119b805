"""User reconcile: a credential in a Secret named after the User, the same credential and the
User's ACLs in its Cluster; both removed from the cluster when the User is deleted.

- scram-sha-512: a generated password, kept in the Secret (`password`, and `sasl.jaas.config`
  ready for a Kafka client), and its salted SCRAM-SHA-512 credential in the metadata log.
- tls: a client certificate signed by the Cluster's clients CA (`user.crt`, `user.key`,
  `user.pem` = key and certificate for a PEM keystore, `ca.crt` = the cluster CA to trust the
  brokers), reissued `renewalDays` before it expires or when either CA is not the one it
  names. Its principal is `User:CN=<name>`.
- A change of authentication type leaves nothing of the old one: its Secret keys, its SCRAM
  credential and the ACLs of its principal (`status.username`, the one last applied) go.
- ACLs: exactly the spec's, for the User's principal: missing ones are created, others of
  that principal deleted (the spec is the truth, as with Topic configs).
- Quotas (`spec.quotas`: producerByteRate, consumerByteRate, requestPercentage,
  controllerMutationRate): exactly the spec's, on the principal's user entity, through
  AlterClientQuotas (user_quotas.py); dropped ones are removed, and all go with the User.
"""
from __future__ import annotations

import asyncio
import datetime
import hashlib
import secrets
from typing import Any

import kopf
from rillet.client import quotas, security
from rillet.defs.acl import AclBinding

from .. import pki
from ..builders import names
from ..conditions import Outcome
from ..pause import is_paused
from ..spec import ClusterSpec, SpecError, UserSpec, parse_cluster, parse_user
from ..user_quotas import quota_changes, removal, user_entity
from . import access
from .common import (kube, one_pass, paused_pass, replacing, retry_or_let_go,
                     write_outcome)

ADMIN_TIMEOUT_S = 10.0
MECHANISM = "SCRAM-SHA-512"
LABEL_USER = names.LABEL_USER


class UserRefused(Exception):
    def __init__(self, reason: str, message: str, error: bool = True) -> None:
        super().__init__(message)
        self.reason, self.error = reason, error


def jaas_config(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


def desired_acls(us: UserSpec) -> set[AclBinding]:
    return {AclBinding(r.resource_type, r.resource_name, r.pattern_type, us.principal, r.host,
                       op, r.permission) for r in us.acls for op in r.operations}


def _secret(us: UserSpec, data: dict[str, str], owner: Any,
            existing: dict | None) -> dict:
    """The User's Secret holding `data` alone: keys of another authentication type it held
    are removed (null in the merge patch)."""
    stale = {k: None for k in (existing or {}).get("data") or {} if k not in data}
    obj = {"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": us.name, "namespace": us.namespace,
                        "labels": {"app.kubernetes.io/managed-by": names.MANAGED_BY,
                                   names.LABEL_CLUSTER: us.cluster, LABEL_USER: us.name}},
           "data": {**stale, **{k: pki.b64(v) for k, v in data.items()}}}
    kopf.append_owner_reference(obj, owner=owner)
    return obj


async def _own_secret(us: UserSpec) -> dict | None:
    """The User's Secret as it is, refusing one of the same name the operator did not make."""
    existing = await asyncio.to_thread(kube().get, "Secret", us.name, us.namespace)
    if existing is not None and \
            (existing["metadata"].get("labels") or {}).get(LABEL_USER) != us.name:
        raise UserRefused("SecretConflict", f"Secret {us.name} exists and is not this User's "
                                            f"(no label {LABEL_USER}={us.name}); rename one")
    return existing


async def _tls_credentials(us: UserSpec, cs: ClusterSpec, existing: dict | None,
                           owner: Any, logger: Any) -> None:
    clients_ca = await asyncio.to_thread(kube().get, "Secret", names.clients_ca(cs.name),
                                         cs.namespace)
    cluster_ca = await asyncio.to_thread(kube().get, "Secret", names.cluster_ca_cert(cs.name),
                                         cs.namespace)
    if clients_ca is None or cluster_ca is None:
        raise UserRefused("ClusterNotReady", f"Cluster {cs.name} has no CAs yet", error=False)
    ca = pki.user_ca_keypair(clients_ca)   # a brought one may name them ca.key, ca.crt
    held = {k: pki.secret_text_or_none(existing, k) for k in ("user.crt", "user.key", "ca.crt")}
    cert = held["user.crt"]
    now = datetime.datetime.now(datetime.timezone.utc)
    trust = pki.secret_text(cluster_ca, "ca.crt")
    if cert and held["user.key"] and pki.same_certificates(held["ca.crt"], trust) and \
            pki.issued_by(cert, ca.cert_pem) and \
            not pki.needs_renewal(cert, now, cs.certificates.renewal_days):
        return
    issued = pki.issue_cert(ca, us.name, [], now, cs.certificates.validity_days, client=True,
                            server=False)
    data = {"user.crt": issued.cert_pem, "user.key": issued.key_pem,
            "user.pem": issued.key_pem + issued.cert_pem,
            "ca.crt": trust}
    await asyncio.to_thread(kube().apply, _secret(us, data, owner, existing))
    kopf.info(owner, reason="CertificateIssued",
              message=f"client certificate {pki.principal_of(issued.cert_pem)} in Secret "
                      f"{us.name}, valid until {pki.not_after(issued.cert_pem)}")
    logger.info("issued the client certificate of %s", us.name)


async def _scram_password(us: UserSpec, existing: dict | None, owner: Any) -> str:
    password = pki.secret_text_or_none(existing, "password")
    jaas = pki.secret_text_or_none(existing, "sasl.jaas.config")
    if password and jaas == jaas_config(us.name, password):
        return password
    password = password or secrets.token_urlsafe(24)
    await asyncio.to_thread(kube().apply, _secret(
        us, {"password": password, "sasl.jaas.config": jaas_config(us.name, password)}, owner,
        existing))
    return password


async def _apply_quotas(admin: Any, us: UserSpec, before: str, owner: Any) -> None:
    """The spec's quotas on the User's principal; a previous principal's go."""
    if before != us.principal:
        old = user_entity(before)
        await quotas.alter_quotas(admin, old, removal(await quotas.describe_quotas(admin, old)))
    entity = user_entity(us.principal)
    changes = quota_changes(dict(us.quotas), await quotas.describe_quotas(admin, entity))
    if changes:
        await quotas.alter_quotas(admin, entity, changes)
        kopf.info(owner, reason="QuotasUpdated", message=", ".join(
            f"{k} {'removed' if v is None else f'= {v:g}'}" for k, v in sorted(changes.items())))


async def reconcile(body: Any, meta: Any, spec: Any, status: Any, name: str, namespace: str,
                    patch: kopf.Patch, logger: Any, memo: Any, **_: Any) -> None:
    async with one_pass(memo, "User", name, namespace, status, patch) as current:
        if paused_pass(patch, current, meta, body, logger):
            return
        outcome = await _reconcile(body, spec, current, name, namespace, patch, logger)
        write_outcome(patch, current, outcome, meta.get("generation") or 0, body, logger)


async def _reconcile(body: Any, spec: Any, status: dict, name: str, namespace: str,
                     patch: kopf.Patch, logger: Any) -> Outcome:
    try:
        us = parse_user(name, namespace, dict(spec))
    except SpecError as exc:
        return Outcome(False, exc.reason, str(exc), error=True)
    patch.status["secret"] = us.name
    if us.name in names.secrets_of(us.cluster):
        return Outcome(False, "SecretConflict", f"Secret {us.name} is one of Cluster "
                                                f"{us.cluster}'s certificates; rename the User",
                       error=True)
    cluster = await asyncio.to_thread(kube().get, "Cluster", us.cluster, namespace)
    if cluster is None:
        return Outcome(False, "ClusterNotFound", f"no Cluster {us.cluster} in namespace "
                                                 f"{namespace}; waiting for it",
                       reconciling=True)
    try:
        cs = parse_cluster(us.cluster, namespace, dict(cluster.get("spec") or {}))
        if not cs.secured:
            raise UserRefused("ClusterNotSecured", f"Cluster {us.cluster} has no spec.listeners"
                                                   f": it authenticates nobody")
        existing = await _own_secret(us)
        if us.authentication == "tls":
            await _tls_credentials(us, cs, existing, body, logger)
        else:
            password = await _scram_password(us, existing, body)
        wanted = desired_acls(us)
        if wanted and not cs.authorization:
            raise UserRefused("AuthorizationDisabled",
                              f"Cluster {us.cluster} has no spec.authorization (type simple): "
                              f"its brokers would not enforce this User's ACLs")
        async with (await access.target(cs)).admin(ADMIN_TIMEOUT_S) as admin:
            if us.authentication == "tls":
                if MECHANISM in await security.scram_mechanisms(admin, us.name) and \
                        await security.delete_scram(admin, us.name, MECHANISM):
                    kopf.info(body, reason="CredentialsRemoved",
                              message=f"{MECHANISM} credentials of {us.name} removed")
                patch.status["credentialDigest"] = None
            else:
                digest = hashlib.sha256(password.encode()).hexdigest()[:16]
                if status.get("credentialDigest") != digest or \
                        MECHANISM not in await security.scram_mechanisms(admin, us.name):
                    await security.upsert_scram(admin, us.name, password, MECHANISM)
                    kopf.info(body, reason="CredentialsSet",
                              message=f"{MECHANISM} credentials of {us.name} set")
                patch.status["credentialDigest"] = digest
            before = "User:" + str(status.get("username") or us.principal.removeprefix("User:"))
            if cs.authorization:
                if before != us.principal:     # the authentication type changed
                    await security.delete_acls(admin, await security.describe_acls(admin, before))
                have = await security.describe_acls(admin, us.principal)
                await security.create_acls(admin, sorted(wanted - have, key=repr))
                await security.delete_acls(admin, sorted(have - wanted, key=repr))
                if wanted != have:
                    kopf.info(body, reason="AclsUpdated",
                              message=f"{len(wanted - have)} ACLs added, "
                                      f"{len(have - wanted)} removed")
            await _apply_quotas(admin, us, before, body)
    except UserRefused as exc:
        return Outcome(False, exc.reason, str(exc), error=exc.error,
                       reconciling=not exc.error)
    except SpecError as exc:
        return Outcome(False, "ClusterInvalid", f"Cluster {us.cluster}: {exc}",
                       reconciling=True)
    except Exception as exc:  # unreachable cluster, broker error: retried by the timer
        logger.debug("user %s: cluster not reachable: %s", name, exc)   # the condition says it once
        return Outcome(False, "ClusterNotReady", f"{type(exc).__name__}: {exc}",
                       reconciling=True)
    patch.status["acls"] = len(wanted)
    # A merge patch merges objects key by key: a quota dropped from the spec must go too.
    patch.status["quotas"] = replacing(status.get("quotas"), dict(us.quotas) or None)
    patch.status["username"] = us.principal.removeprefix("User:")   # applied: see `before`
    return Outcome(True, "Ready", f"{us.principal}: {us.authentication} credentials in Secret "
                                  f"{us.name}, {len(wanted)} ACLs")


async def delete(spec: Any, meta: Any, name: str, namespace: str, body: Any, logger: Any,
                 **_: Any) -> None:
    """The User's ACLs, SCRAM credential and quotas leave the cluster (its Secret goes by owner
    reference); let go when the Cluster is gone or unreachable (common.retry_or_let_go). A
    paused User (pause.py) is let go with its credentials, ACLs and quotas left in place."""
    if is_paused(meta):
        logger.info("user %s is paused: letting it go, the cluster keeps its access", name)
        return
    try:
        us = parse_user(name, namespace, dict(spec))
    except SpecError:
        return    # never applied
    cluster = await asyncio.to_thread(kube().get, "Cluster", us.cluster, namespace)
    if cluster is None or (cluster.get("metadata") or {}).get("deletionTimestamp"):
        logger.info("cluster %s is gone: letting user %s go", us.cluster, name)
        return
    try:
        cs = parse_cluster(us.cluster, namespace, dict(cluster.get("spec") or {}))
        async with (await access.target(cs)).admin(ADMIN_TIMEOUT_S) as admin:
            removed = await security.delete_acls(
                admin, await security.describe_acls(admin, us.principal)) \
                if cs.authorization else 0
            # Whatever the type now: a credential from before a type change goes too.
            dropped = await security.delete_scram(admin, us.name, MECHANISM)
            entity = user_entity(us.principal)
            await quotas.alter_quotas(admin, entity,
                                      removal(await quotas.describe_quotas(admin, entity)))
        logger.info("user %s: %d ACLs removed%s", name, removed,
                    ", SCRAM credentials removed" if dropped else "")
    except Exception as exc:
        retry_or_let_go(body, meta, us.cluster, f"user {name}", exc)
