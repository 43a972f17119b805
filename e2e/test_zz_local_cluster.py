"""The local harness itself: `down` leaves nothing behind. Runs last in the session (it takes the
local cluster down; the session fixture then has nothing left to do). Skipped when the cluster
was already up before the session: the fixture promises to leave that one running."""
from __future__ import annotations

import pytest

from localk8s import cluster, host
from localk8s.testing import echo_container, wait_ready


@pytest.mark.e2e_last
def test_down_leaves_nothing_behind(k8s):
    if not k8s.local:
        pytest.skip("checks the local cluster harness; this session uses $KUBECONFIG")
    if k8s.already_up:
        pytest.skip("the local cluster was up before the session and is to be left running; "
                    "this test would take it down")
    kube, ns = k8s.kube, "e2e-down-leaves-nothing"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.wait_for("default service account", lambda: kube.get_or_none(
        "ServiceAccount", "default", ns), 60)
    # Something of every kind down must remove: pods with containers, a claim (PV folder),
    # and pod IPs on the bridge.
    kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "data", "namespace": ns},
                 "spec": {"accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": "16Mi"}}}})
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "namespace": ns},
                 "spec": {"containers": [echo_container(volumeMounts=[
                     {"name": "data", "mountPath": "/data"}])],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
    wait_ready(kube, ns, "held")
    before = cluster.leftovers(k8s.layout)
    assert any(item.startswith("podman pod") for item in before), before
    assert any(item.startswith("process") for item in before), before
    assert f"route blackhole {host.SERVICE_CIDR}" in before

    cluster.down(k8s.layout, quiet=True)

    assert cluster.leftovers(k8s.layout) == []
    assert not cluster.status(k8s.layout, quiet=True)
