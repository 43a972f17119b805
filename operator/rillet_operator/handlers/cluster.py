"""Cluster handlers: the reconcile (create, update, resume, timer) and the delete.

The reconcile is one ClusterReconciler pass (cluster_reconciler.py: validate, apply the owned
objects, scale, measure the brokers, roll, write status), one at a time per Cluster.
"""
from __future__ import annotations

import asyncio
from typing import Any

import kopf

from ..builders import names
from .cluster_reconciler import ClusterReconciler
from .common import kube, one_pass, paused_pass


async def reconcile(body: Any, meta: Any, spec: Any, status: Any, name: str, namespace: str,
                    patch: kopf.Patch, logger: Any, memo: Any, **_: Any) -> None:
    async with one_pass(memo, "Cluster", name, namespace, status, patch) as current:
        if paused_pass(patch, current, meta, body, logger):
            return
        await ClusterReconciler(body, meta, spec, current, name, namespace, patch, logger,
                                kube()).reconcile()


async def delete(name: str, namespace: str, logger: Any, **_: Any) -> None:
    """The cluster-scoped rack binding goes with the Cluster (namespaced objects go by GC)."""
    if await asyncio.to_thread(kube().delete, "ClusterRoleBinding",
                               names.rack_binding(namespace, name)):
        logger.info("deleted ClusterRoleBinding %s", names.rack_binding(namespace, name))
