"""The one Kubernetes API wrapper the handlers use (pykube-ng's HTTP client underneath).

Blocking calls: handlers run them with `asyncio.to_thread`. `apply` is the level-based verb:
create when missing, otherwise merge-patch what the builder says onto what is there (a
deleted or edited owned object comes back as built). Each object carries the hash of what the
operator last wanted (annotation rillet.io/desired-hash), which tells an update the operator
made (the Cluster's spec or a scaling step changed what it wants) from a correction of drift
(someone else edited the object), so Events say which one happened.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pykube

# kind -> (apiVersion, plural, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "ConfigMap": ("v1", "configmaps", True),
    "Secret": ("v1", "secrets", True),
    "Service": ("v1", "services", True),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "Pod": ("v1", "pods", True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "Node": ("v1", "nodes", False),
    "StorageClass": ("storage.k8s.io/v1", "storageclasses", False),
    "Namespace": ("v1", "namespaces", False),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Cluster": ("rillet.io/v1alpha1", "clusters", True),
    "Topic": ("rillet.io/v1alpha1", "topics", True),
    "User": ("rillet.io/v1alpha1", "users", True),
}


DESIRED_HASH = "rillet.io/desired-hash"


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass
class Kube:
    api: pykube.HTTPClient

    @classmethod
    def from_env(cls) -> "Kube":
        return cls(pykube.HTTPClient(pykube.KubeConfig.from_env()))

    def _call(self, method: str, kind: str, namespace: str | None, name: str | None = None,
              sub: str | None = None, **kwargs: Any) -> Any:
        version, plural, namespaced = RESOURCES[kind]
        url = "/".join(p for p in (plural, name, sub) if p)
        resp = self.api.request(method, version=version, url=url,
                                namespace=namespace if namespaced else None, **kwargs)
        if resp.status_code >= 300:
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise ApiError(resp.status_code, f"{method} {kind} {name or ''}: {message}")
        return resp.json() if resp.content else None

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self._call("GET", kind, namespace, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None = None, selector: dict | None = None
             ) -> list[dict]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in selector.items())} \
            if selector else None
        return self._call("GET", kind, namespace, params=params)["items"]

    def create(self, obj: dict) -> dict:
        return self._call("POST", obj["kind"], obj["metadata"].get("namespace"),
                          data=json.dumps(obj))

    def patch(self, kind: str, name: str, patch: dict, namespace: str | None = None,
              sub: str | None = None) -> dict:
        return self._call("PATCH", kind, namespace, name, sub, data=json.dumps(patch),
                          headers={"Content-Type": "application/merge-patch+json"})

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            self._call("DELETE", kind, namespace, name)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise

    def apply(self, obj: dict) -> tuple[str, list[str]]:
        """Create or bring `obj` in line: ("created" | "updated" | "corrected" | "unchanged",
        the paths that differed). "updated": the operator wants something new; "corrected":
        someone else changed what the operator wants."""
        obj = with_desired_hash(obj)
        kind, meta = obj["kind"], obj["metadata"]
        current = self.get(kind, meta["name"], meta.get("namespace"))
        if current is None:
            try:
                self.create(obj)
                return "created", []
            except ApiError as exc:
                if exc.status != 409:  # created meanwhile: correct it below
                    raise
                current = self.get(kind, meta["name"], meta.get("namespace")) or {}
        if drifted(obj, current):
            self.patch(kind, meta["name"], desired_patch(obj), meta.get("namespace"))
            return change_kind(obj, current), drifted_paths(obj, current)
        return "unchanged", []


def desired_patch(obj: dict) -> dict:
    """The merge patch that makes an existing object what the builder says (no status)."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}


def drifted(desired: Any, current: Any) -> bool:
    """Whether `current` differs from `desired` in anything `desired` states (fields the
    API server adds, such as defaults and clusterIP, are not drift)."""
    if isinstance(desired, dict):
        if not isinstance(current, dict):
            return True
        return any(drifted(v, current.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(current, list) or len(desired) != len(current):
            return True
        return any(drifted(d, c) for d, c in zip(desired, current))
    return desired != current


def desired_hash(obj: dict) -> str:
    """The hash of what the builder says, without the hash annotation itself."""
    meta = dict(obj.get("metadata") or {})
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != DESIRED_HASH}
    meta["annotations"] = notes
    text = json.dumps({**obj, "metadata": meta}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_desired_hash(obj: dict) -> dict:
    meta = dict(obj["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), DESIRED_HASH: desired_hash(obj)}
    return {**obj, "metadata": meta}


def change_kind(desired: dict, current: dict) -> str:
    """"updated" when what the operator wants changed since it last applied the object (or it
    never marked it), "corrected" when the object drifted from an unchanged want."""
    want = (desired["metadata"].get("annotations") or {}).get(DESIRED_HASH)
    had = ((current.get("metadata") or {}).get("annotations") or {}).get(DESIRED_HASH)
    return "corrected" if had and had == want else "updated"


def drifted_paths(desired: Any, current: Any, prefix: str = "") -> list[str]:
    """The paths (spec.replicas, metadata.annotations...) where `current` differs from what
    `desired` states; a list that differs is named as a whole."""
    if isinstance(desired, dict) and isinstance(current, dict):
        out: list[str] = []
        for k, v in desired.items():
            out += drifted_paths(v, current.get(k), f"{prefix}.{k}" if prefix else k)
        return out
    return [prefix or "."] if drifted(desired, current) else []
