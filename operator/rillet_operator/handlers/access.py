"""How the operator reaches a Cluster's brokers.

A cluster without spec.listeners: its PLAINTEXT bootstrap address. A secured one: the
replication listener (mutual TLS), showing the operator's certificate (a super user), trusting
the cluster CA. The SSL context is built once per certificate, not per reconcile.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from rillet.client import AdminClient

from .. import pki
from ..builders import names
from ..spec import ClusterSpec, parse_cluster
from .common import kube

_contexts: dict[str, ssl.SSLContext] = {}


class NotReachableYet(Exception):
    """The operator's certificate is not there yet (the cluster's first reconcile)."""


@dataclass(frozen=True)
class Target:
    bootstrap: str
    ssl_context: ssl.SSLContext | None = None

    def admin(self, timeout: float) -> AdminClient:
        return AdminClient(self.bootstrap, timeout=timeout, ssl_context=self.ssl_context)


def client_context(keypair: pki.KeyPair, ca_pem: str) -> ssl.SSLContext:
    key = hashlib.sha256((keypair.key_pem + keypair.cert_pem + ca_pem).encode()).hexdigest()
    if key not in _contexts:
        ctx = ssl.create_default_context(cadata=ca_pem)
        # load_cert_chain reads files only: a private temporary file for the call.
        fd, path = tempfile.mkstemp(prefix="rillet-operator-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(keypair.key_pem + keypair.cert_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
        if len(_contexts) > 64:   # renewed certificates leave old entries behind
            _contexts.clear()
        _contexts[key] = ctx
    return _contexts[key]


def secured_target(cs: ClusterSpec, keypair: pki.KeyPair, ca_pem: str) -> Target:
    return Target(names.internal_bootstrap_address(cs.name, cs.namespace),
                  client_context(keypair, ca_pem))


async def target(cs: ClusterSpec) -> Target:
    if not cs.secured:
        return Target(names.bootstrap_address(cs.name, cs.namespace))
    secret = await asyncio.to_thread(kube().get, "Secret", names.operator_certs(cs.name),
                                      cs.namespace)
    try:
        keypair = pki.keypair_from_secret(secret or {})
        ca_pem = pki.secret_text(secret or {}, "ca.crt")
    except (KeyError, ValueError) as exc:
        raise NotReachableYet(f"no operator certificate for cluster {cs.name} yet "
                              f"({type(exc).__name__}: {exc})") from None
    return secured_target(cs, keypair, ca_pem)


async def target_of(cluster: dict[str, Any]) -> Target:
    """The Target of a Cluster object as read from the API (Topic and User handlers)."""
    meta = cluster["metadata"]
    return await target(parse_cluster(meta["name"], meta["namespace"],
                                      dict(cluster.get("spec") or {})))
