"""A small Kubernetes REST client on the standard library (no kubernetes/pykube dependency).

Used by the e2e tests, the mission and `make demo`. It speaks plain JSON over HTTPS with a client
certificate or a bearer token, which is all a kubeconfig from kind needs. `Kube.from_kubeconfig` reads any kubeconfig through `kubectl config view --raw -o json`, so
YAML kubeconfigs (kind) work without a YAML library.

Thread-safety: a `Kube` holds only immutable settings; every request opens its own connection, so
one instance may be shared by threads.
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterator

# Plural resource names for the kinds this project touches: (api path prefix, plural, namespaced).
_RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "Service": ("/api/v1", "services", True),
    "Endpoints": ("/api/v1", "endpoints", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "PersistentVolume": ("/api/v1", "persistentvolumes", False),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "Event": ("/api/v1", "events", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "ReplicaSet": ("/apis/apps/v1", "replicasets", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "EndpointSlice": ("/apis/discovery.k8s.io/v1", "endpointslices", True),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}


class ApiError(Exception):
    """A non-2xx answer from the API server; `status` is the HTTP code, `body` the Status object."""

    def __init__(self, status: int, body: Any, what: str) -> None:
        self.status = status
        self.body = body
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{what}: HTTP {status}: {message}")


@dataclass(frozen=True)
class Kube:
    """Connection settings for one API server."""

    server: str  # https://host:port
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False

    @classmethod
    def from_kubeconfig(cls, path: str) -> "Kube":
        """The current context of a kubeconfig. JSON ones (the local cluster's) are read
        directly; YAML ones (kind) through `kubectl config view`, so no YAML library is needed."""
        try:
            cfg = json.loads(open(path).read())
            ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
            cfg["clusters"] = [c for c in cfg["clusters"] if c["name"] == ctx["cluster"]]
            cfg["users"] = [u for u in cfg.get("users", []) if u["name"] == ctx.get("user")]
        except ValueError:
            raw = subprocess.run(
                ["kubectl", "config", "view", "--raw", "--minify", "-o", "json"],
                env={**os.environ, "KUBECONFIG": path}, check=True, capture_output=True, text=True,
                timeout=30,
            ).stdout
            cfg = json.loads(raw)
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0].get("user", {}) if cfg.get("users") else {}
        files = tempfile.mkdtemp(prefix="rillet-kubeconfig-")

        def materialise(name: str, data_key: str, file_key: str, src: dict) -> str | None:
            # kind embeds base64 data; ssl wants files, so write them to a private temp folder.
            if src.get(file_key):
                return str(src[file_key])
            if src.get(data_key):
                target = os.path.join(files, name)
                with open(target, "wb") as f:
                    f.write(base64.b64decode(src[data_key]))
                os.chmod(target, 0o600)
                return target
            return None

        return cls(
            server=cluster["server"],
            ca_file=materialise("ca.crt", "certificate-authority-data", "certificate-authority", cluster),
            cert_file=materialise("client.crt", "client-certificate-data", "client-certificate", user),
            key_file=materialise("client.key", "client-key-data", "client-key", user),
            token=user.get("token"),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )

    # ---- transport -------------------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def _connect(self, timeout: float) -> http.client.HTTPSConnection:
        u = urllib.parse.urlsplit(self.server)
        return http.client.HTTPSConnection(u.hostname, u.port or 443, context=self._context(),
                                           timeout=timeout)

    def _headers(self, content_type: str = "application/json") -> dict[str, str]:
        h = {"Accept": "application/json", "Content-Type": content_type}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def request(self, method: str, path: str, body: Any = None, params: dict | None = None,
                content_type: str = "application/json", timeout: float = 30.0,
                raw: bool = False) -> Any:
        """One API call; returns the decoded JSON (or text) answer, raises ApiError on non-2xx."""
        if params:
            path += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        payload = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        conn = self._connect(timeout)
        try:
            conn.request(method, path, body=payload, headers=self._headers(content_type))
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if raw and resp.status < 300:
            return data.decode(errors="replace")
        try:
            decoded: Any = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode(errors="replace")
        if resp.status >= 300:
            raise ApiError(resp.status, decoded, f"{method} {path}")
        return decoded

    # ---- paths -------------------------------------------------------------------------------

    @staticmethod
    def path(kind: str, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:
        prefix, plural, namespaced = _RESOURCES[kind]
        p = prefix
        if namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p

    @staticmethod
    def path_for(obj: dict) -> str:
        """Collection path for a manifest, known kind or not (apiVersion decides the prefix)."""
        kind = obj["kind"]
        ns = obj.get("metadata", {}).get("namespace")
        if kind in _RESOURCES:
            return Kube.path(kind, ns)
        api = obj["apiVersion"]
        prefix = f"/api/{api}" if "/" not in api else f"/apis/{api}"
        plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
        return prefix + (f"/namespaces/{ns}" if ns else "") + f"/{plural}"

    # ---- verbs ---------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.request("GET", self.path(kind, namespace, name))

    def get_or_none(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.get(kind, name, namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None = None, **params: Any) -> list[dict]:
        return self.request("GET", self.path(kind, namespace), params=params or None)["items"]

    def create(self, obj: dict, namespace: str | None = None) -> dict:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        if ns:
            obj = {**obj, "metadata": {**obj.get("metadata", {}), "namespace": ns}}
        return self.request("POST", self.path_for(obj), obj)

    def apply(self, obj: dict, namespace: str | None = None) -> dict:
        """Create, or replace the object's spec when it exists (enough for test fixtures)."""
        try:
            return self.create(obj, namespace)
        except ApiError as e:
            if e.status != 409:
                raise
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return self.patch(obj["kind"], obj["metadata"]["name"], obj, ns, merge=True)

    def patch(self, kind: str, name: str, patch: dict, namespace: str | None = None,
              sub: str | None = None, merge: bool = False) -> dict:
        ctype = "application/merge-patch+json" if merge else "application/strategic-merge-patch+json"
        if kind not in ("Pod", "Service", "Node", "StatefulSet", "Deployment", "ReplicaSet",
                        "ConfigMap", "Secret", "Namespace", "PersistentVolumeClaim", "PersistentVolume",
                        "Job", "ServiceAccount", "Endpoints"):
            ctype = "application/merge-patch+json"
        return self.request("PATCH", self.path(kind, namespace, name, sub), patch, content_type=ctype)

    def delete(self, kind: str, name: str, namespace: str | None = None,
               grace_seconds: int | None = None, uid: str | None = None,
               propagation: str | None = "Background") -> dict | None:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            return self.request("DELETE", self.path(kind, namespace, name), body)
        except ApiError as e:
            if e.status in (404, 409):
                return None
            raise

    def watch(self, kind: str, namespace: str | None = None, resource_version: str | None = None,
              timeout_seconds: int = 60, **params: Any) -> Iterator[dict]:
        """Yields watch events ({"type", "object"}) until the server ends the watch."""
        q = {"watch": "1", "timeoutSeconds": str(timeout_seconds), "allowWatchBookmarks": "false",
             "resourceVersion": resource_version, **params}
        path = self.path(kind, namespace) + "?" + urllib.parse.urlencode(
            {k: v for k, v in q.items() if v is not None})
        conn = self._connect(timeout_seconds + 15)
        try:
            conn.request("GET", path, headers=self._headers())
            resp = conn.getresponse()
            if resp.status >= 300:
                raise ApiError(resp.status, resp.read().decode(errors="replace"), f"WATCH {path}")
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def wait_for(self, what: str, check, timeout: float, interval: float = 0.5) -> Any:
        """Polls `check()` until it returns a truthy value; raises TimeoutError naming `what`."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = check()
            except ApiError as e:
                last = e
                if e.status not in (404, 409, 429, 500, 503):
                    raise
            if last and not isinstance(last, Exception):
                return last
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
            time.sleep(interval)

    def logs(self, name: str, namespace: str, container: str | None = None,
             previous: bool = False) -> str:
        params = {"container": container, "previous": "true" if previous else None}
        return self.request("GET", self.path("Pod", namespace, name, "log"), params=params, raw=True)
