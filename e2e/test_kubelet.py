"""What a real kubelet does with rillet's pods (kind: e2e/kind.sh): the restricted Pod Security
Standard on the example Cluster as a user applies it, a hung broker killed by its liveness probe
and back in every ISR, and a broker under a 512Mi memory limit through a produce+consume load
with no OOM kill (its peak RSS reported).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from localk8s.kube import Kube
from localk8s.testing import pod_ready, restricted_namespace
from test_operator import (CLUSTER, REPO, _cr_path, _debug, assert_no_pod_security_warning,
                           delete_namespace, get_cr, job_result, kubectl, operator, run_job,
                           start_job)  # noqa: F401

pytestmark = pytest.mark.timeout(1200)

BOOTSTRAP = f"{CLUSTER}-bootstrap:9092"
# The memory must-show: 5 minutes through `make kind-memory-load`, a minute in the suite.
LOAD_SECONDS = float(os.environ.get("RILLET_MEMORY_LOAD_S", "60"))
MEMORY_LIMIT = "512Mi"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def example(k8s, operator) -> Iterator[tuple[str, subprocess.CompletedProcess]]:  # noqa: F811
    """examples/cluster.yaml, unchanged, `kubectl apply`d into a namespace enforcing
    restricted; (namespace, what kubectl said)."""
    kube = k8s.kube
    ns = f"e2e-kubelet-{uuid.uuid4().hex[:5]}"
    kube.create(restricted_namespace(ns))
    try:
        applied = kubectl(k8s.kubeconfig, "apply", "-n", ns, "-f",
                          str(REPO / "examples" / "cluster.yaml"))
        assert applied.returncode == 0, applied.stderr
        out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready",
                      f"cluster.rillet.io/{CLUSTER}", "-n", ns, "--timeout=420s", timeout=450)
        if out.returncode != 0:
            pytest.fail(f"Cluster not Ready: {out.stderr}\n{_debug(kube, ns)}")
        yield ns, applied
    finally:
        delete_namespace(kube, ns)


def test_example_cluster_in_a_restricted_namespace_is_ready_with_no_pod_security_warning(
        k8s, example):
    kube, (ns, applied) = k8s.kube, example
    assert "Warning" not in applied.stderr, applied.stderr
    pods = kube.list("Pod", ns, labelSelector=f"rillet.io/cluster={CLUSTER}")
    assert len(pods) == 3 and all(pod_ready(p) for p in pods), [p["status"] for p in pods]
    # PodSecurity admission refuses a pod with a FailedCreate event on its StatefulSet, and
    # warns on any workload breaking the namespace's warn level: neither happened.
    refused = [e for e in kube.list("Event", ns) if e["reason"] == "FailedCreate"
               or "PodSecurity" in e.get("message", "")]
    assert refused == [], refused
    assert_no_pod_security_warning(k8s, ns, f"{CLUSTER}-broker")
    # What a user of the namespace may do with the operator's resources (its RBAC), and what
    # the brokers' own service account may not (create pods).
    can = kubectl(k8s.kubeconfig, "auth", "can-i", "create", "clusters.rillet.io", "-n", ns)
    assert can.stdout.strip() == "yes", can
    broker_sa = pods[0]["spec"]["serviceAccountName"]
    cannot = kubectl(k8s.kubeconfig, "auth", "can-i", "create", "pods", "-n", ns,
                     f"--as=system:serviceaccount:{ns}:{broker_sa}")
    assert cannot.stdout.strip() == "no", cannot


def _node_exec(node: str, *argv: str) -> str:
    """A command in a kind node's container (as `docker exec` into a kind node)."""
    engine = shutil.which("podman") or "docker"   # kind's podman provider here, docker elsewhere
    out = subprocess.run([engine, "exec", node, *argv], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, (argv, out.stderr)
    return out.stdout


def _broker_status(kube: Kube, ns: str, pod: str) -> dict:
    return next(s for s in kube.get("Pod", pod, ns)["status"]["containerStatuses"]
                if s["name"] == "broker")


def test_hung_broker_is_killed_by_its_liveness_probe_and_rejoins_the_isr(k8s, example):
    """SIGSTOP every process of broker-1's container (from its node: SIGSTOP sent inside the
    container's PID namespace would not reach its PID 1). Its /healthz stops answering, the
    kubelet's liveness probe fails, the kubelet kills and restarts the container in the same
    pod, and the broker is back in every partition's ISR."""
    kube, (ns, _) = k8s.kube, example
    topic = "liveness"
    kube.request("POST", _cr_path(ns, "topics"), {
        "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
        "metadata": {"name": topic, "namespace": ns},
        "spec": {"cluster": CLUSTER, "partitions": 3, "replicas": 3}})
    out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready", f"topic.rillet.io/{topic}",
                  "-n", ns, "--timeout=180s", timeout=200)
    assert out.returncode == 0, (out.stderr, get_cr(kube, ns, "topics", topic))
    assert run_job(kube, ns, ["produce-consume", BOOTSTRAP, topic, "100"])["consumed_back"] == 100

    name = f"{CLUSTER}-broker-1"
    pod = kube.get("Pod", name, ns)
    before = _broker_status(kube, ns, name)
    container_id = before["containerID"].split("://", 1)[1]
    node = pod["spec"]["nodeName"]
    pids = _node_exec(node, "ctr", "-n", "k8s.io", "task", "ps", container_id).split()[2::2]
    assert pids, f"no processes of {container_id} on {node}"
    _node_exec(node, "kill", "-STOP", *pids)

    def restarted() -> dict | None:
        status = _broker_status(kube, ns, name)
        return status if status["restartCount"] > before["restartCount"] else None
    # failureThreshold 6 x periodSeconds 10, then SIGTERM, and SIGKILL after the 30 s grace
    after = kube.wait_for(f"{name} restarted by the kubelet", restarted, timeout=240, interval=2)
    assert kube.get("Pod", name, ns)["metadata"]["uid"] == pod["metadata"]["uid"], \
        "the same pod: the kubelet restarted its container"
    assert after["lastState"]["terminated"]["reason"] in ("Error", "OOMKilled") and \
        after["lastState"]["terminated"]["exitCode"] == 137, after["lastState"]
    said = [e["message"] for e in kube.list("Event", ns, fieldSelector=f"involvedObject.name={name}")
            if e["reason"] in ("Unhealthy", "Killing")]
    assert any("Liveness probe failed" in m for m in said), said
    assert any("failed liveness probe, will be restarted" in m for m in said), said
    kube.wait_for(f"{name} ready again", lambda: pod_ready(kube.get("Pod", name, ns)),
                  timeout=240, interval=2)
    seen = run_job(kube, ns, ["inspect", BOOTSTRAP, topic, "--full-isr", "180"], timeout=300)
    assert seen["full_isr"], seen["partitions"]
    assert all(len(p["isr"]) == 3 for p in seen["partitions"].values()), seen["partitions"]
    assert run_job(kube, ns, ["count", BOOTSTRAP, topic]) == {"records": 100, "end_offsets": 100}


def _exec(kubeconfig: str, ns: str, pod: str, *argv: str) -> str:
    out = kubectl(kubeconfig, "exec", "-n", ns, pod, "-c", "broker", "--", *argv, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_broker_under_a_512mi_limit_survives_produce_and_consume_load(k8s, operator,  # noqa: F811
                                                                      record_property):
    """One broker limited to 512Mi, a producer (acks=all, idempotent) streaming for
    LOAD_SECONDS and reading everything back, and bulk 1 KiB records beside it: no OOM kill,
    no restart, nothing lost; the peak RSS (VmHWM of the broker process) and the cgroup's
    peak usage are reported."""
    kube = k8s.kube
    ns = f"e2e-memory-{uuid.uuid4().hex[:5]}"
    kube.create(restricted_namespace(ns))
    name = "small"
    try:
        kube.request("POST", _cr_path(ns, "clusters"), {
            "apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "config": {"min.insync.replicas": 1},
                     "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
                     "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                                   "limits": {"memory": MEMORY_LIMIT}}}})
        out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready", f"cluster.rillet.io/{name}",
                      "-n", ns, "--timeout=300s", timeout=330)
        assert out.returncode == 0, (out.stderr, _debug(kube, ns))
        pod = f"{name}-broker-0"
        limits = _broker_status_spec(kube, ns, pod)
        assert limits == {"memory": MEMORY_LIMIT}, limits
        bootstrap = f"{name}-bootstrap:9092"
        for topic in ("load", "bulk"):
            kube.request("POST", _cr_path(ns, "topics"), {
                "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
                "metadata": {"name": topic, "namespace": ns},
                "spec": {"cluster": name, "partitions": 6, "replicas": 1}})
            out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready",
                          f"topic.rillet.io/{topic}", "-n", ns, "--timeout=120s", timeout=150)
            assert out.returncode == 0, out.stderr
        stream = start_job(kube, ns, ["stream", bootstrap, "load", "500", str(LOAD_SECONDS)])
        bulk_records = int(LOAD_SECONDS * 500)   # 1 KiB each: about 30 MB a minute
        filled = run_job(kube, ns, ["fill", bootstrap, "bulk", str(bulk_records), "1024"],
                         timeout=LOAD_SECONDS + 600)
        result = job_result(kube, ns, stream, timeout=LOAD_SECONDS + 900)
        assert result["failed"] == 0 and result["missing"] == 0, result
        assert run_job(kube, ns, ["count", bootstrap, "bulk"], timeout=600) == {
            "records": bulk_records, "end_offsets": bulk_records}

        status = _broker_status(kube, ns, pod)
        assert status["restartCount"] == 0 and "terminated" not in status.get("lastState", {}), \
            status
        hwm_kib = int(next(line.split()[1] for line in
                           _exec(k8s.kubeconfig, ns, pod, "cat", "/proc/1/status").splitlines()
                           if line.startswith("VmHWM:")))
        cgroup = {key: int(_exec(k8s.kubeconfig, ns, pod, "cat",
                                 f"/sys/fs/cgroup/memory/memory.{key}").strip())
                  for key in ("max_usage_in_bytes", "limit_in_bytes", "failcnt")}
        assert cgroup["limit_in_bytes"] == 512 * MIB, cgroup
        process = _exec(k8s.kubeconfig, ns, pod, "cat", "/proc/1/cmdline").replace("\0", " ")
        assert "rillet serve" in process, process   # the start script exec'd the broker
        report = {"seconds": LOAD_SECONDS, "produced": result["sent"], "bulk": filled,
                  "peak_rss_mib": round(hwm_kib / 1024, 1),
                  "cgroup_peak_mib": round(cgroup["max_usage_in_bytes"] / MIB, 1),
                  "cgroup_failcnt": cgroup["failcnt"]}
        record_property("memory", json.dumps(report))
        print(f"\nbroker under {MEMORY_LIMIT}: {json.dumps(report)}")
        Path(os.environ.get("RILLET_MEMORY_REPORT", "/dev/null")).write_text(json.dumps(report))
        assert hwm_kib * 1024 < 512 * MIB, report
        oom = [e for e in kube.list("Event", ns) if "OOM" in e.get("reason", "")
               or "OOM" in e.get("message", "")]
        assert oom == [], oom
    finally:
        delete_namespace(kube, ns)


def _broker_status_spec(kube: Kube, ns: str, pod: str) -> dict:
    """The broker container's resource limits as the pod runs them."""
    container = next(c for c in kube.get("Pod", pod, ns)["spec"]["containers"]
                     if c["name"] == "broker")
    return container.get("resources", {}).get("limits", {})
