"""Two operator replicas through Kopf peering: exactly one handles resources, the other stands
by, and the standby takes over when the active pod goes.

Kopf pauses an operator that sees a live peer of higher priority (and both at equal priority);
each rillet operator process picks a random priority, and the chart names each peer by its pod
(POD_ID), so the peering object says which pod should be active.
"""
from __future__ import annotations

from typing import Iterator

import pytest

from localk8s.kube import ApiError, Kube
from localk8s.testing import pod_ready
from test_operator import _cr_path, condition, get_cr, operator_release, patch_cr

pytestmark = pytest.mark.timeout(600)

PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"


@pytest.fixture(scope="module")
def two_replicas(k8s, helm) -> Iterator[tuple[str, str]]:
    with operator_release(k8s, helm, ["--set", "replicas=2", "--set",
                                      "reconcileIntervalSeconds=5"], "rillet-peers") as found:
        yield found


def _operator_pods(kube: Kube, ns: str, release: str) -> dict[str, dict]:
    pods = kube.list("Pod", ns, labelSelector=f"app.kubernetes.io/instance={release}")
    return {p["metadata"]["name"]: p for p in pods
            if pod_ready(p) and not p["metadata"].get("deletionTimestamp")}


def _peers(kube: Kube, release: str) -> dict[str, int]:
    """Pod name -> priority of the live peers the peering object lists."""
    try:
        obj = kube.request("GET", f"{PEERINGS}/{release}-rillet")
    except ApiError:
        return {}
    return {ident: int(info["priority"]) for ident, info in (obj.get("status") or {}).items()
            if info and int(info.get("lifetime", 0)) > 0}


def _both_known(kube: Kube, ns: str, release: str) -> tuple[dict, dict] | None:
    pods = _operator_pods(kube, ns, release)
    peers = _peers(kube, release)
    return (pods, peers) if len(pods) == 2 and set(pods) <= set(peers) else None


def _paused(kube: Kube, ns: str, pod: str) -> bool:
    """Kopf with a named peering starts paused and logs each change: paused unless its last
    word was "Resuming operations"."""
    lines = [line for line in kube.logs(pod, ns, "operator").splitlines()
             if "Pausing operations" in line or "Resuming operations" in line]
    return not lines or "Pausing operations" in lines[-1]


def _handled(kube: Kube, ns: str, pod: str, obj_ns: str, name: str) -> bool:
    """Whether this operator pod's log shows a pass over the Topic: at INFO, the line of its
    condition's change (Kopf's per-handler "succeeded" lines are DEBUG now, issue 32)."""
    try:
        log = kube.logs(pod, ns, "operator")
    except ApiError:
        return False
    return any(f"[Topic {obj_ns}/{name}]" in line for line in log.splitlines())


def test_exactly_one_replica_is_active_and_the_standby_takes_over(k8s, two_replicas, namespace):
    kube = k8s.kube
    ns, release = two_replicas
    pods, peers = kube.wait_for("both replicas in the peering object",
                                lambda: _both_known(kube, ns, release), timeout=120)
    priorities = {p: peers[p] for p in pods}
    assert len(set(priorities.values())) == 2, f"equal priorities freeze both: {priorities}"
    active = max(priorities, key=priorities.get)
    standby = min(priorities, key=priorities.get)
    kube.wait_for(f"{standby} paused", lambda: _paused(kube, ns, standby), timeout=120)
    kube.wait_for(f"{active} active", lambda: not _paused(kube, ns, active), timeout=120)

    # A Topic whose Cluster does not exist: cheap to handle, and its condition shows a pass.
    name = "waiting"
    kube.request("POST", _cr_path(namespace, "topics"), {
        "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"cluster": "nowhere", "partitions": 1, "replicas": 1}})
    try:
        _handover(kube, ns, release, namespace, name, active, standby)
    finally:
        # Its finalizer needs an operator: removed while this release still runs.
        kube.request("DELETE", _cr_path(namespace, "topics", name))
        kube.wait_for("the Topic deleted", lambda: get_cr(kube, namespace, "topics", name)
                      is None, timeout=120)


def _handover(kube: Kube, ns: str, release: str, namespace: str, name: str, active: str,
              standby: str) -> None:
    kube.wait_for("ClusterNotFound", lambda: condition(get_cr(
        kube, namespace, "topics", name)).get("reason") == "ClusterNotFound", timeout=90)
    kube.wait_for(f"{active} handled it", lambda: _handled(kube, ns, active, namespace, name),
                  timeout=60)
    assert not _handled(kube, ns, standby, namespace, name), "the standby must not act"

    # The active pod goes (its keep-alive withdraws it from the peering object on the way out);
    # the standby, still running, is the only peer left and resumes.
    kube.delete("Pod", active, ns)
    kube.wait_for(f"{standby} resumes", lambda: not _paused(kube, ns, standby), timeout=180)
    patch_cr(kube, namespace, "topics", name, {"spec": {"partitions": 2}})
    kube.wait_for("the new generation handled", lambda: (lambda t: t["status"].get(
        "observedGeneration") == t["metadata"]["generation"])(get_cr(
            kube, namespace, "topics", name)), timeout=120)
    # The Deployment's replacement pod joined with its own priority: still exactly one active.
    pods, peers = kube.wait_for("two replicas again", lambda: _both_known(kube, ns, release),
                                timeout=180)
    assert len({peers[p] for p in pods}) == 2
    leader = max(pods, key=lambda p: peers[p])
    kube.wait_for(f"only {leader} (the higher priority) active", lambda: [
        p for p in pods if not _paused(kube, ns, p)] == [leader], timeout=120)
