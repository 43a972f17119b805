"""e2e: spec.storage.size on a running Cluster, on kind's local-path storage.

- The cluster's default class (kind's `standard`) cannot expand
  volumes (no allowVolumeExpansion): a larger
  size gets condition StorageResize with reason StorageExpansionUnsupported, a smaller one
  StorageShrinkRefused, and the claims and the StatefulSet stay as they are while the cluster
  stays Ready.
- A class that allows expansion but has no resizer in this cluster (allowVolumeExpansion: true,
  no provisioner: the test makes a volume per broker by hand, a hostPath on its own node, as an
  administrator pre-provisions them): the operator asks broker 0's claim to grow, and with its
  volume never grown it leaves broker 1's alone (one broker at a time), saying so in status. A real grow (256Mi -> 512Mi with the data intact) needs a CSI driver that expands
  volumes, which this kind cluster does not have.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

import pytest

from localk8s.kube import Kube
from localk8s.testing import restricted_namespace
from test_operator import (_cr_path, _debug, condition, delete_namespace, get_cr,  # noqa: F401
                           kubectl, operator, patch_cr)

pytestmark = pytest.mark.timeout(1500)

CLUSTER = "disks"
EXPANDABLE = "rillet-e2e-expandable"


def _cluster(k8s, ns: str, replicas: int, storage_class: str, ready: bool = True) -> None:
    k8s.kube.request("POST", _cr_path(ns, "clusters"), {
        "apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": ns},
        "spec": {"replicas": replicas, "storage": {"type": "persistent-claim", "size": "256Mi",
                                                   "class": storage_class}}})
    if not ready:
        return
    out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready", f"cluster.rillet.io/{CLUSTER}",
                  "-n", ns, "--timeout=600s", timeout=630)
    if out.returncode != 0:
        pytest.fail(f"Cluster not Ready: {out.stderr}\n{_debug(k8s.kube, ns)}")


@pytest.fixture
def ns(k8s, operator, request) -> Iterator[str]:  # noqa: F811
    """A restricted namespace per test with the operator running, deleted (waited for)."""
    module = request.module.__name__.removeprefix("test_").replace("_", "-")[:20]
    name = f"e2e-{module}-{uuid.uuid4().hex[:5]}"
    k8s.kube.create(restricted_namespace(name))
    try:
        yield name
    finally:
        delete_namespace(k8s.kube, name)


def _wait_condition(kube: Kube, ns: str, reason: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cr = get_cr(kube, ns, "clusters", CLUSTER)
        found = condition(cr, "StorageResize")
        if found.get("reason") == reason and (cr.get("status") or {}).get(
                "observedGeneration") == cr["metadata"]["generation"]:
            return cr
        time.sleep(2)
    pytest.fail(f"no StorageResize {reason}: {_debug(kube, ns)}")


def _requested(kube: Kube, ns: str, ordinal: int) -> str:
    claim = kube.get("PersistentVolumeClaim", f"data-{CLUSTER}-broker-{ordinal}", ns)
    return claim["spec"]["resources"]["requests"]["storage"]


def _template_size(kube: Kube, ns: str) -> str:
    sts = kube.get("StatefulSet", f"{CLUSTER}-broker", ns)
    return sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]


def _default_class(kube: Kube) -> str:
    """The StorageClass claims get when they name none (kind: standard)."""
    default = [c for c in kube.list("StorageClass")
               if (c["metadata"].get("annotations") or {}).get(
                   "storageclass.kubernetes.io/is-default-class") == "true"]
    if len(default) != 1 or default[0].get("allowVolumeExpansion"):
        pytest.skip("this cluster has no single default StorageClass without expansion")
    return default[0]["metadata"]["name"]


def test_growth_on_a_class_without_expansion_and_a_shrink_are_refused(k8s, ns):
    kube = k8s.kube
    fixed = _default_class(kube)
    _cluster(k8s, ns, 1, fixed)
    idle = condition(get_cr(kube, ns, "clusters", CLUSTER), "StorageResize")
    assert idle.get("status") == "False", idle
    for size, reason, words in (
            ("512Mi", "StorageExpansionUnsupported",
             f"StorageClass {fixed} does not allow volume expansion"),
            ("128Mi", "StorageShrinkRefused", "a claim cannot shrink")):
        patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"storage": {"size": size}}})
        cr = _wait_condition(kube, ns, reason)
        found = condition(cr, "StorageResize")
        assert found["status"] == "True" and words in found["message"], found
        assert condition(cr)["status"] == "True", condition(cr)   # still serves
        assert _requested(kube, ns, 0) == "256Mi"
        assert _template_size(kube, ns) == "256Mi"
        assert cr["status"]["storage"]["claims"][0]["capacity"] == "256Mi"
    # Back to the size it has: nothing to say.
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"storage": {"size": "256Mi"}}})
    _wait_condition(kube, ns, "Idle")


@pytest.fixture
def expandable(k8s) -> Iterator[str]:
    """The class, and a 256Mi volume per broker pinned to its own worker: the node's /tmp
    (world-writable, so the non-root broker can write there; the node goes with `down`).
    local-path-provisioner serves only the classes of its own config, so none is dynamic."""
    kube = k8s.kube
    if not all(a["address"].startswith("198.19.255.") for n in kube.list("Node")
               for a in n["status"]["addresses"] if a["type"] == "InternalIP"):
        # Nodes that share one host would give both hostPath volumes the same /tmp.
        pytest.skip("needs nodes with their own file systems (kind)")
    workers = sorted(n["metadata"]["name"] for n in kube.list("Node")
                     if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"])
    kube.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": {"name": EXPANDABLE}, "provisioner": "kubernetes.io/no-provisioner",
                 "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain",
                 "allowVolumeExpansion": True})
    volumes = [f"{EXPANDABLE}-{i}" for i in range(2)]
    try:
        for volume, node in zip(volumes, workers):
            kube.create({"apiVersion": "v1", "kind": "PersistentVolume",
                         "metadata": {"name": volume},
                         "spec": {"capacity": {"storage": "256Mi"},
                                  "accessModes": ["ReadWriteOnce"],
                                  "storageClassName": EXPANDABLE,
                                  "persistentVolumeReclaimPolicy": "Retain",
                                  "hostPath": {"path": "/tmp", "type": "Directory"},
                                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{
                                      "matchExpressions": [{
                                          "key": "kubernetes.io/hostname", "operator": "In",
                                          "values": [node]}]}]}}}})
        yield EXPANDABLE
    finally:
        for volume in volumes:
            kube.delete("PersistentVolume", volume)
        kube.delete("StorageClass", EXPANDABLE)


def test_growth_asks_one_claim_at_a_time(k8s, ns, expandable):
    kube = k8s.kube
    # Not waited Ready: what is tested is the claims, and a broker on a hand-made volume can
    # find an earlier run's data there (another cluster id) and not start.
    _cluster(k8s, ns, 2, expandable, ready=False)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        claims = (((get_cr(kube, ns, "clusters", CLUSTER) or {}).get("status") or {}).get(
            "storage") or {}).get("claims") or []
        if len(claims) == 2 and all(c.get("capacity") == "256Mi" for c in claims):
            break
        time.sleep(2)
    else:
        pytest.fail(f"claims not bound: {_debug(kube, ns)}")
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"storage": {"size": "512Mi"}}})
    cr = _wait_condition(kube, ns, "StorageResizing")
    assert f"claim data-{CLUSTER}-broker-0 grows" in condition(cr, "StorageResize")["message"]
    assert _requested(kube, ns, 0) == "512Mi"
    # local-path has no resizer: broker 0's volume keeps 256Mi, so broker 1's claim waits,
    # pass after pass (the operator's timer runs every 5 s here).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert _requested(kube, ns, 1) == "256Mi"
        time.sleep(3)
    cr = get_cr(kube, ns, "clusters", CLUSTER)
    assert "grows to 512Mi (has 256Mi)" in condition(cr, "StorageResize")["message"]
    assert _template_size(kube, ns) == "256Mi"
