"""Helpers for e2e tests: manifests of the e2e echo image, namespaces that enforce the
restricted Pod Security Standard and what a test's own pods need to run in them, and bounded
waits on pods."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .kube import ApiError, Kube

ECHO_IMAGE = "rillet/e2e-echo:dev"

# The product runs where platform teams enforce the restricted standard: the API server's
# PodSecurity admission refuses any pod in these namespaces that breaks it (enforce), and
# answers a warning for it (warn), so a test sees a refusal as an API error, not a hang.
RESTRICTED_LABELS = {"pod-security.kubernetes.io/enforce": "restricted",
                     "pod-security.kubernetes.io/enforce-version": "latest",
                     "pod-security.kubernetes.io/warn": "restricted",
                     "pod-security.kubernetes.io/warn-version": "latest"}
# A test's own pods (client Jobs) under it; their images' USER is numeric and not root.
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def restricted_namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(RESTRICTED_LABELS)}}


def echo_container(name: str = "echo", **extra: Any) -> dict:
    c = {"name": name, "image": ECHO_IMAGE, "imagePullPolicy": "IfNotPresent",
         "ports": [{"name": "http", "containerPort": 8080}],
         "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}
    c.update(extra)
    return c


def pod_ready(pod: dict | None) -> bool:
    if not pod:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions", []) or [])


def wait_pod(kube: Kube, ns: str, name: str, check, what: str, timeout: float = 120) -> dict:
    return kube.wait_for(f"pod {ns}/{name} {what}",
                         lambda: (lambda p: p if p and check(p) else None)(
                             kube.get_or_none("Pod", name, ns)), timeout)


def wait_ready(kube: Kube, ns: str, name: str, timeout: float = 120) -> dict:
    return wait_pod(kube, ns, name, pod_ready, "Ready", timeout)


def http(url: str, data: bytes | None = None, timeout: float = 10) -> tuple[int, str]:
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def http_json(url: str, timeout: float = 10) -> Any:
    status, body = http(url, timeout=timeout)
    assert status == 200, f"GET {url}: {status} {body}"
    return json.loads(body)


def q(**params: str) -> str:
    return urllib.parse.urlencode(params)


def retry(what: str, fn, timeout: float = 30, interval: float = 0.5):
    """Calls fn until it returns without AssertionError/OSError/ApiError; bounded by timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (AssertionError, OSError, ApiError) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {timeout:.0f}s: {e}") from e
            time.sleep(interval)


def pod_get(kube: Kube, ns: str, pod: str, path: str, port: int = 8080) -> str:
    """GET a path of a pod's HTTP server through the API server's pod proxy: portable between the
    local cluster and kind (the test never needs a route to pod IPs)."""
    return kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}", raw=True,
                        timeout=20)


def pod_json(kube: Kube, ns: str, pod: str, path: str, port: int = 8080) -> Any:
    return json.loads(pod_get(kube, ns, pod, path, port))


def pod_post(kube: Kube, ns: str, pod: str, path: str, body: bytes, port: int = 8080) -> str:
    return kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}", body,
                        content_type="application/octet-stream", raw=True, timeout=20)
