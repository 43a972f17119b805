"""Pod behaviour the operator and the chart rely on: probes gate availability, crashing
containers restart with back-off, the downward API and ConfigMaps reach the container, unknown
images fail clearly, deletion is graceful."""
from __future__ import annotations

import base64
import time

from localk8s.testing import (ECHO_IMAGE, echo_container, pod_get, pod_json, q, wait_pod,
                              wait_ready)

WAITING_IMAGE_REASONS = {"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName"}


def _status(pod: dict, name: str) -> dict:
    return next(s for s in pod["status"].get("containerStatuses", []) if s["name"] == name)


def test_failing_readiness_probe_keeps_deployment_unavailable(k8s, namespace):
    kube, ns = k8s.kube, namespace
    labels = {"app": "never-ready"}
    kube.create({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "never-ready", "namespace": ns},
                 "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels}, "spec": {
                              "terminationGracePeriodSeconds": 2,
                              "containers": [echo_container(readinessProbe={
                                  "httpGet": {"path": "/no-such-path", "port": 8080},
                                  "periodSeconds": 1, "failureThreshold": 1})]}}}})
    pod = kube.wait_for("the deployment's pod running", lambda: next(
        (p for p in kube.list("Pod", ns, labelSelector="app=never-ready")
         if "running" in (p["status"].get("containerStatuses") or [{}])[0].get("state", {})), None),
        timeout=120)
    name = pod["metadata"]["name"]
    # The server is up and answers; only the probed path is wrong. Watch several probe periods.
    assert pod_get(kube, ns, name, "/healthz") == "ok"
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        dep = kube.get("Deployment", "never-ready", ns)
        available = {c["type"]: c["status"] for c in dep.get("status", {}).get("conditions", [])}
        assert dep["status"].get("availableReplicas", 0) == 0
        assert available.get("Available") != "True"
        pod = kube.get("Pod", name, ns)
        status = _status(pod, "echo")
        assert status["ready"] is False and "running" in status["state"]
        assert status["restartCount"] == 0  # readiness never restarts a container
        time.sleep(1)
    assert available.get("Available") == "False"


def test_crashing_container_restarts_with_growing_restart_count(k8s, namespace):
    kube, ns = k8s.kube, namespace
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": ns},
                 "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
                          "containers": [echo_container(args=["crash", "0.2"])]}})
    seen: list[int] = []

    def restarted_three_times() -> bool:
        pod = kube.get("Pod", "crasher", ns)
        statuses = pod["status"].get("containerStatuses") or []
        if statuses:
            seen.append(statuses[0]["restartCount"])
        return bool(statuses) and statuses[0]["restartCount"] >= 3

    kube.wait_for("restartCount >= 3", restarted_three_times, timeout=150, interval=0.5)
    assert seen == sorted(seen), f"restartCount went down: {seen}"
    # In its back-off (CrashLoopBackOff) the crashed container is not ready.
    status = kube.wait_for("the crashed container in CrashLoopBackOff", lambda: (
        lambda s: s if s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"
        else None)(_status(kube.get("Pod", "crasher", ns), "echo")), timeout=90, interval=0.2)
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert status["ready"] is False
    # Logs of the attempt that crashed are readable through the API (kubectl logs --previous;
    # a kubelet keeps that one dead container, so this is asked while it waits to restart).
    assert "crashing on purpose" in kube.logs("crasher", ns, "echo", previous=True)


def test_downward_api_env_and_configmap_volume(k8s, namespace):
    kube, ns = k8s.kube, namespace
    kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "settings", "namespace": ns},
                 "data": {"greeting": "hello from a configmap", "mode": "e2e"}})
    kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": ns},
                 "data": {"password": base64.b64encode(b"s3cret").decode()}})

    def field(path: str) -> dict:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    env = [{"name": "MY_POD", **field("metadata.name")},
           {"name": "MY_NAMESPACE", **field("metadata.namespace")},
           {"name": "MY_UID", **field("metadata.uid")},
           {"name": "MY_NODE", **field("spec.nodeName")},
           {"name": "MY_IP", **field("status.podIP")},
           {"name": "MY_ROLE", **field("metadata.labels['role']")},
           {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
           {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
           {"name": "COMPOSED", "value": "$(MY_POD)@$(MY_NODE)"}]
    kube.create({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "downward", "namespace": ns, "labels": {"role": "probe-me"}},
                 "spec": {"containers": [{
                     "name": "app", "image": ECHO_IMAGE, "env": env,
                     "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                     "workingDir": "/etc/settings",
                     "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"},
                                      {"name": "info", "mountPath": "/etc/podinfo"}]}],
                     "volumes": [{"name": "settings", "configMap": {"name": "settings"}},
                                 {"name": "info", "downwardAPI": {"items": [
                                     {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                                     {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}})
    pod = wait_ready(kube, ns, "downward")
    seen = pod_json(kube, ns, "downward", "/env")
    assert seen["MY_POD"] == "downward"
    assert seen["MY_NAMESPACE"] == ns
    assert seen["MY_UID"] == pod["metadata"]["uid"]
    assert seen["MY_NODE"] == pod["spec"]["nodeName"]
    assert seen["MY_IP"] == pod["status"]["podIP"]
    assert seen["MY_ROLE"] == "probe-me"
    assert seen["GREETING"] == "hello from a configmap"
    assert seen["PASSWORD"] == "s3cret"
    assert seen["CFG_mode"] == "e2e"
    assert seen["COMPOSED"] == f"downward@{pod['spec']['nodeName']}"
    # workingDir: a relative path is read from /etc/settings.
    assert pod_get(kube, ns, "downward", "/file?" + q(path="greeting")) == "hello from a configmap"
    assert pod_get(kube, ns, "downward", "/file?" + q(path="/etc/settings/greeting")) == \
        "hello from a configmap"
    assert 'role="probe-me"' in pod_get(kube, ns, "downward", "/file?" + q(path="/etc/podinfo/labels"))
    assert pod_get(kube, ns, "downward", "/file?" + q(path="/etc/podinfo/name")) == "downward"


def test_unknown_image_fails_with_clear_reason(k8s, namespace):
    kube, ns = k8s.kube, namespace
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "noimage", "namespace": ns},
                 "spec": {"containers": [{"name": "app", "image": "rillet/no-such-image:dev",
                                          "imagePullPolicy": "IfNotPresent"}]}})

    def waiting_reason(pod: dict) -> bool:
        statuses = pod["status"].get("containerStatuses") or []
        return bool(statuses) and statuses[0]["state"].get("waiting", {}).get(
            "reason") in WAITING_IMAGE_REASONS

    pod = wait_pod(kube, ns, "noimage", waiting_reason, "waiting on its image", timeout=90)
    waiting = _status(pod, "app")["state"]["waiting"]
    assert "rillet/no-such-image:dev" in waiting.get("message", ""), waiting
    assert pod["status"]["phase"] == "Pending"


def test_graceful_deletion_sigterm_then_sigkill_after_grace(k8s, namespace):
    """A container that handles SIGTERM goes at once; one that ignores it is killed when the
    grace period ends, not before and not much later."""
    kube, ns = k8s.kube, namespace
    for name, script in (("polite", "import signal,sys,time\nsignal.signal(signal.SIGTERM, "
                                    "lambda *a: sys.exit(0))\nprint('up', flush=True)\ntime.sleep(3600)"),
                         ("stubborn", "import signal,time\nsignal.signal(signal.SIGTERM, "
                                      "signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(3600)")):
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                     "spec": {"terminationGracePeriodSeconds": 12, "containers": [{
                         "name": "app", "image": ECHO_IMAGE, "command": ["python3", "-u", "-c", script]}]}})
    for name in ("polite", "stubborn"):
        wait_ready(kube, ns, name)
    timings = {}
    for name in ("polite", "stubborn"):
        t0 = time.monotonic()
        kube.delete("Pod", name, ns)
        kube.wait_for(f"{name} gone", lambda: kube.get_or_none("Pod", name, ns) is None, timeout=60)
        timings[name] = time.monotonic() - t0
    assert timings["polite"] < 9, timings
    assert 11 <= timings["stubborn"] < 35, timings


def test_init_containers_run_in_order_before_the_containers(k8s, namespace):
    kube, ns = k8s.kube, namespace

    def append(word: str) -> dict:
        return {"name": f"init-{word}", "image": ECHO_IMAGE, "command": ["python3", "-c",
                f"open('/work/order', 'a').write('{word}\\n')"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}]}

    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "inits", "namespace": ns},
                 "spec": {"initContainers": [append("first"), append("second")],
                          "containers": [echo_container(volumeMounts=[
                              {"name": "work", "mountPath": "/work"}])],
                          "volumes": [{"name": "work", "emptyDir": {}}]}})
    pod = wait_ready(kube, ns, "inits")
    assert pod_get(kube, ns, "inits", "/file?" + q(path="/work/order")) == "first\nsecond\n"
    inits = pod["status"]["initContainerStatuses"]
    assert [s["name"] for s in inits] == ["init-first", "init-second"]
    assert all(s["state"]["terminated"]["exitCode"] == 0 for s in inits)


def test_failing_init_container_with_restart_never_fails_the_pod(k8s, namespace):
    kube, ns = k8s.kube, namespace
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "badinit", "namespace": ns},
                 "spec": {"restartPolicy": "Never",
                          "initContainers": [{"name": "fail", "image": ECHO_IMAGE,
                                              "command": ["python3", "-c", "raise SystemExit(7)"]}],
                          "containers": [echo_container()]}})
    pod = wait_pod(kube, ns, "badinit", lambda p: p["status"].get("phase") == "Failed", "Failed")
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert "running" not in pod["status"]["containerStatuses"][0]["state"]
