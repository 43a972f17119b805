"""The Kubeflow Spark operator in the e2e cluster, as its users install it: its own Helm chart
from the pinned Go module (spark/operator/VERSION, `e2e/build-k8s spark-operator-chart`), our
image of it (spark/operator/Dockerfile: the binary on the rillet Spark image, since the
controller runs spark-submit in its pod), the webhook on (it puts the SparkApplication's
security contexts, volumes and secrets on the driver and executor pods; the operator makes the
webhook's certificate itself), in a namespace enforcing the restricted Pod Security Standard.

install() watches only the namespaces given (the chart's spark.jobNamespaces): the controller
submits applications there and the webhook mutates pods there only. apply_application() and
running_driver() are the mission's (e2e/mission.py) Spark steps through the operator.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from localk8s.images import SPARK_OPERATOR_TAG
from localk8s.kube import Kube
from localk8s.testing import restricted_namespace
from mission import Mission, MissionError

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "spark-operator"
APP = "rillet-windowed-counts"   # spark/k8s/sparkapplication.yaml
RELEASE = "spark-operator"
APPS = "/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications"


def chart_dir() -> str:
    """The chart inside the pinned module (downloaded into Go's module cache when missing)."""
    out = subprocess.run([str(REPO / "e2e" / "build-k8s"), "spark-operator-chart"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=600).stdout
    return out.strip().splitlines()[-1]


def values(namespaces: list[str]) -> list[str]:
    """helm --set arguments: our image (loaded into the nodes, never pulled) and the job
    namespaces; the chart's service account and role for Spark are not made, the job brings
    its own (spark/k8s/rbac.yaml)."""
    repository, tag = SPARK_OPERATOR_TAG.rsplit(":", 1)
    return ["--set", "image.registry=docker.io", "--set", f"image.repository={repository}",
            "--set", f"image.tag={tag}", "--set", "image.pullPolicy=IfNotPresent",
            "--set", "spark.jobNamespaces={" + ",".join(namespaces) + "}",
            "--set", "spark.serviceAccount.create=false", "--set", "spark.rbac.create=false"]


def install(kube: Kube, helm: str, kubeconfig: str, namespaces: list[str]) -> str:
    """helm upgrade --install of the chart, waiting for the controller and the webhook; returns
    helm's output (raises with it when the install fails)."""
    if kube.get_or_none("Namespace", NAMESPACE) is None:
        kube.create(restricted_namespace(NAMESPACE))
    out = subprocess.run(
        [helm, "upgrade", "--install", RELEASE, chart_dir(), "--namespace", NAMESPACE,
         *values(namespaces), "--wait", "--timeout", "300s"],
        env={**os.environ, "KUBECONFIG": kubeconfig}, capture_output=True, text=True, timeout=420)
    if out.returncode != 0:
        raise RuntimeError(f"helm install of the Spark operator failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def uninstall(kube: Kube, helm: str, kubeconfig: str) -> None:
    """helm uninstall, then its namespace (the chart's CRDs stay, as helm leaves them)."""
    subprocess.run([helm, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"],
                   env={**os.environ, "KUBECONFIG": kubeconfig}, capture_output=True, text=True,
                   timeout=300)
    kube.delete("Namespace", NAMESPACE)


def apply_application(m: Mission) -> dict:
    """spark/k8s/sparkapplication.yaml for the mission's Cluster, topic and plan, created for
    the Spark operator to submit and restart; returns it as created."""
    app = yaml.safe_load((REPO / "spark" / "k8s" / "sparkapplication.yaml").read_text())
    p = m.plan
    ours = {"--bootstrap-servers": m.bootstrap(), "--topics": m.topic, "--window": p.window,
            "--watermark": p.watermark}
    args = app["spec"]["arguments"]
    for i in range(0, len(args) - 1, 2):
        args[i + 1] = ours.get(args[i], args[i + 1])
    app["metadata"]["namespace"] = m.ns
    created = m.kube.request("POST", APPS.format(ns=m.ns), app)
    m.report(f"SparkApplication {app['metadata']['name']} created")
    return created


def application(m: Mission, name: str) -> dict:
    return m.kube.request("GET", f"{APPS.format(ns=m.ns)}/{name}")


def running_driver(m: Mission, app: str, not_uids: frozenset[str] = frozenset(),
                   timeout: float = 420) -> tuple[str, str]:
    """(name, uid) of the running driver pod the Spark operator made for `app`, other than the
    pods in not_uids (those it replaced)."""
    def running() -> tuple[str, str] | None:
        for pod in m.kube.list("Pod", m.ns, labelSelector=(
                f"sparkoperator.k8s.io/app-name={app},spark-role=driver")):
            meta = pod["metadata"]
            if pod["status"].get("phase") == "Running" and meta["uid"] not in not_uids:
                return meta["name"], meta["uid"]
        return None
    try:
        found = m.wait(f"a running driver of SparkApplication {app}", running, timeout, 2)
    except MissionError as e:
        status = application(m, app).get("status")
        raise MissionError(f"{e}\nSparkApplication status: {json.dumps(status)}") from e
    m.report(f"Spark driver {found[0]} (uid {found[1][:8]}) runs")
    return found
