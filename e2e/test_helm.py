"""helm, built from its Go module, installs and uninstalls a chart on the cluster (the path the
project's own chart takes), waiting for its Deployment to become Available."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from localk8s.testing import ECHO_IMAGE

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: e2e-echo\nversion: 0.1.0\n",
    "values.yaml": f"image: {ECHO_IMAGE}\nreplicas: 2\n",
    "templates/deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-echo
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}-echo}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}-echo}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: echo
        image: {{ .Values.image }}
        imagePullPolicy: IfNotPresent
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
""",
}


def _helm(helm: str, kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helm, *args], env={**os.environ, "KUBECONFIG": kubeconfig},
                          capture_output=True, text=True, timeout=300)


def test_helm_installs_and_uninstalls_a_chart(k8s, helm, namespace, tmp_path: Path):
    for rel, text in CHART.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    out = _helm(helm, k8s.kubeconfig, "install", "demo", str(tmp_path), "--namespace", namespace,
                "--wait", "--timeout", "180s")
    assert out.returncode == 0, out.stderr
    dep = k8s.kube.get("Deployment", "demo-echo", namespace)
    assert dep["status"].get("availableReplicas") == 2, dep["status"]
    listed = _helm(helm, k8s.kubeconfig, "list", "--namespace", namespace, "--short")
    assert listed.stdout.split() == ["demo"]
    out = _helm(helm, k8s.kubeconfig, "uninstall", "demo", "--namespace", namespace, "--wait",
                "--timeout", "120s")
    assert out.returncode == 0, out.stderr
    assert k8s.kube.get_or_none("Deployment", "demo-echo", namespace) is None
