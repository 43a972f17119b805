"""What one reconcile pass of a Cluster works with, handed to its steps as one value.

The Cluster reconciler (cluster_reconciler.py) builds it once it has parsed the spec and knows
how to reach the brokers; the scaling and rolling steps read the pass's inputs from it and
write status through its patch, instead of taking the same seven parameters each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import kopf

from ..kube import Kube
from ..spec import ClusterSpec
from .access import Target


@dataclass(frozen=True)
class ClusterContext:
    """One pass's inputs: read-only, except `patch` (the status this pass writes).

    `status` is the status the pass started from, as Kopf handed it; steps compare against it
    and write their changes into `patch.status`, which Kopf applies once the pass returns.
    """
    spec: ClusterSpec
    body: Any          # the Cluster as Kopf gave it: Events and owner references point at it
    meta: Any
    status: dict
    patch: kopf.Patch
    logger: Any
    kube: Kube
    target: Target     # how the operator reaches the brokers

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    def annotation(self, key: str) -> str | None:
        return (self.meta.get("annotations") or {}).get(key)

    def with_replicas(self, replicas: int) -> "ClusterContext":
        """The same pass over the brokers that run now (a scale may be under way)."""
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, replicas=replicas))
