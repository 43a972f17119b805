"""A zone-spread StatefulSet with persistent volumes, per-pod DNS and a client Service: what the
rillet operator relies on for broker pods (one broker per zone, data that outlives the pod,
stable names, scale-down from the highest ordinal)."""
from __future__ import annotations

import json

from localk8s.kube import Kube
from localk8s.testing import (echo_container, pod_get, pod_json, pod_post, pod_ready, q, retry,
                              wait_ready)

ZONE = "topology.kubernetes.io/zone"


def _manifests(ns: str) -> list[dict]:
    labels = {"app": "echo"}
    headless = {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "echo", "namespace": ns},
                "spec": {"clusterIP": "None", "selector": labels,
                         "ports": [{"name": "http", "port": 8080}]}}
    client = {"apiVersion": "v1", "kind": "Service",
              "metadata": {"name": "echo-client", "namespace": ns},
              "spec": {"selector": labels, "ports": [{"name": "http", "port": 8080,
                                                      "targetPort": 8080}]}}
    container = echo_container(
        readinessProbe={"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
        volumeMounts=[{"name": "data", "mountPath": "/data"}])
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "echo", "namespace": ns},
           "spec": {"replicas": 3, "serviceName": "echo", "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "topologySpreadConstraints": [{
                            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": labels}}],
                        "containers": [container]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "64Mi"}}}}]}}
    return [headless, client, sts]


def _pods(kube: Kube, ns: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kube.list("Pod", ns, labelSelector="app=echo")}


def test_statefulset_zones_volumes_dns_scaling_and_namespace_delete(k8s, namespace):
    kube, ns = k8s.kube, namespace
    for obj in _manifests(ns):
        kube.create(obj)

    # Three pods, Running and Ready, one per zone.
    for i in range(3):
        wait_ready(kube, ns, f"echo-{i}", timeout=180)
    pods = _pods(kube, ns)
    assert sorted(pods) == ["echo-0", "echo-1", "echo-2"]
    assert all(p["status"]["phase"] == "Running" for p in pods.values())
    zones = {kube.get("Node", p["spec"]["nodeName"])["metadata"]["labels"][ZONE]
             for p in pods.values()}
    assert len(zones) == 3, f"pods not spread over 3 zones: {zones}"
    assert len({p["status"]["podIP"] for p in pods.values()}) == 3

    # Each has a bound claim.
    for i in range(3):
        pvc = kube.get("PersistentVolumeClaim", f"data-echo-{i}", ns)
        assert pvc["status"]["phase"] == "Bound", pvc["status"]

    # Pods reach each other by headless-service DNS names (full and short forms).
    for src, dst in (("echo-0", "echo-1"), ("echo-1", "echo-2"), ("echo-2", "echo-0")):
        for name in (f"{dst}.echo.{ns}.svc.cluster.local", f"{dst}.echo"):
            answer = retry(f"{src} -> {name}", lambda: json.loads(pod_get(
                kube, ns, src, "/fetch?" + q(url=f"http://{name}:8080/"))), timeout=30)
            assert answer["hostname"] == dst, answer

    # A client reaches them through the Service name: CoreDNS answers its ClusterIP, and
    # kube-proxy spreads connections to it over the ready pods. kube-proxy programs a new
    # Service's rules on its own time (until then the ClusterIP refuses): bounded retries.
    cluster_ip = kube.get("Service", "echo-client", ns)["spec"]["clusterIP"]
    retry("echo-client resolves", lambda: _resolves_to(
        kube, ns, "echo-0", "echo-client", {cluster_ip}), timeout=30)
    answer = retry("echo-client answers on its ClusterIP", lambda: json.loads(pod_get(
        kube, ns, "echo-0", "/fetch?" + q(url="http://echo-client:8080/"))), timeout=60)
    assert answer["hostname"] in pods

    # Data on the claim survives deleting the pod.
    pod_post(kube, ns, "echo-1", "/file?" + q(path="/data/hello"), b"written by echo-1")
    old_uid = pods["echo-1"]["metadata"]["uid"]
    kube.delete("Pod", "echo-1", ns)
    kube.wait_for("echo-1 replaced", lambda: (lambda p: p and p["metadata"]["uid"] != old_uid
                                              and pod_ready(p))(kube.get_or_none("Pod", "echo-1", ns)),
                  timeout=120)
    assert pod_get(kube, ns, "echo-1", "/file?" + q(path="/data/hello")) == "written by echo-1"

    # Scaling to 1 removes the highest ordinals.
    kube.patch("StatefulSet", "echo", {"spec": {"replicas": 1}}, ns)
    kube.wait_for("scale down to echo-0", lambda: sorted(_pods(kube, ns)) == ["echo-0"], timeout=120)
    assert pod_ready(kube.get("Pod", "echo-0", ns))

    # Deleting the namespace removes every object, and the provisioner deletes its volumes.
    kube.delete("Namespace", ns)
    kube.wait_for(f"namespace {ns} gone", lambda: kube.get_or_none("Namespace", ns) is None,
                  timeout=180)
    kube.wait_for("provisioned volumes deleted", lambda: not [
        pv for pv in kube.list("PersistentVolume")
        if pv["spec"].get("claimRef", {}).get("namespace") == ns], timeout=120)


def _resolves_to(kube: Kube, ns: str, pod: str, name: str, expected: set[str]) -> None:
    """`name`, resolved in `pod`, gives exactly `expected`."""
    ips = set(json.loads(pod_get(kube, ns, pod, "/resolve?" + q(name=name))))
    assert ips == expected, f"{name} resolved to {ips}, not {expected}"


def test_pod_reaches_api_server_with_its_service_account(k8s, namespace):
    """In-pod clients (the operator) find the API through KUBERNETES_SERVICE_HOST/PORT and
    authenticate with the mounted token, verifying the server with the mounted ca.crt."""
    kube, ns = k8s.kube, namespace
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api", "namespace": ns},
                 "spec": {"containers": [echo_container()]}})
    wait_ready(kube, ns, "api")
    version = pod_json(kube, ns, "api", "/api?" + q(path="/version"))
    assert version["status"] == 200
    assert json.loads(version["body"])["major"] == "1"
    # Authenticated as the namespace's default service account: listing pods is forbidden (403),
    # not unauthorised (401).
    pods = pod_json(kube, ns, "api", "/api?" + q(path=f"/api/v1/namespaces/{ns}/pods"))
    assert pods["status"] == 403, pods
    assert f"system:serviceaccount:{ns}:default" in pods["body"]
    # Clients that use the well-known name (Spark's driver does) reach the API too.
    by_name = pod_json(kube, ns, "api", "/api?" + q(path="/version", base="https://kubernetes.default.svc"))
    assert by_name["status"] == 200, by_name
