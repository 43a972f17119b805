"""The Kubeflow Spark operator in the e2e cluster, as its users install it: its own Helm chart
from the pinned Go module (spark/operator/VERSION, `e2e/build-k8s spark-operator-chart`), our
image of it (spark/operator/Dockerfile: the binary on the rillet Spark image, since the
controller runs spark-submit in its pod), the webhook on (it puts the SparkApplication's
security contexts, volumes and ports on the driver and executor pods, while its `secrets` reach
them as spark-submit's spark.kubernetes.*.secrets.* settings; the operator makes the webhook's
certificate itself), in a namespace enforcing the restricted Pod Security Standard.

install() watches the namespaces given (the chart's spark.jobNamespaces: the controller submits
applications there and the webhook mutates pods there only), or every namespace when given none
(`--set spark.jobNamespaces={}`, which helm reads as [""]: the chart's "all namespaces", a
cluster-wide role and webhooks without a namespace selector): the e2e session installs it once
that way (conftest.py's `spark_operator_release`) for the modules that make their own
namespaces.
apply_application() and running_driver() are the mission's (e2e/mission.py) Spark steps through
the operator; submit() and finished() run the one-off applications of test_spark_secured.py.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from localk8s.images import SPARK_OPERATOR_TAG
from localk8s.kube import ApiError, Kube
from localk8s.testing import pod_get, restricted_namespace
from mission import Mission, MissionError
from spark_application import METRICS_PORT, TERMINAL_STATES, base, gauge, streaming

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "spark-operator"
APP = "rillet-windowed-counts"   # spark/k8s/sparkapplication.yaml
RELEASE = "spark-operator"
APPS = "/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications"


def chart_dir() -> str:
    """The chart inside the pinned module (downloaded into Go's module cache when missing), or
    $SPARK_OPERATOR_CHART: a checkout of that chart at the same version."""
    if os.environ.get("SPARK_OPERATOR_CHART"):
        return os.environ["SPARK_OPERATOR_CHART"]
    out = subprocess.run([str(REPO / "e2e" / "build-k8s"), "spark-operator-chart"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=600).stdout
    return out.strip().splitlines()[-1]


def values(namespaces: list[str]) -> list[str]:
    """helm --set arguments: our image (loaded into the nodes, never pulled) and the job
    namespaces (none: all); the chart's service account and role for Spark are not made, the
    job brings its own (spark/k8s/rbac.yaml)."""
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


def submit(m: Mission, app: dict) -> dict:
    """Creates the SparkApplication for the Spark operator; returns it as created. Strict
    field validation: a field the CRD does not know is refused, never silently dropped."""
    created = m.kube.request("POST", APPS.format(ns=m.ns), app,
                             params={"fieldValidation": "Strict"})
    m.report(f"SparkApplication {app['metadata']['name']} created")
    return created


def apply_application(m: Mission, max_offsets_per_trigger: int | None = None) -> dict:
    """spark/k8s/sparkapplication.yaml for the mission's Cluster, topic and plan, created for
    the Spark operator to submit and restart; returns it as created. A batch reads at most
    max_offsets_per_trigger records (default: the manifest's), so a small cap spreads a
    backlog over several batches (the lag shows)."""
    return submit(m, streaming(base(), namespace=m.ns, bootstrap=m.bootstrap(), topic=m.topic,
                               window=m.plan.window, watermark=m.plan.watermark,
                               max_offsets_per_trigger=max_offsets_per_trigger))


def application(m: Mission, name: str) -> dict:
    return m.kube.request("GET", f"{APPS.format(ns=m.ns)}/{name}")


def finished(m: Mission, name: str, timeout: float = 480) -> dict:
    """The application's status once it reached a final state (COMPLETED, FAILED,
    SUBMISSION_FAILED); on a timeout, the error carries its status and the pods' log tails."""
    def final() -> dict | None:
        status = application(m, name).get("status") or {}
        state = (status.get("applicationState") or {}).get("state")
        return status if state in TERMINAL_STATES else None
    try:
        return m.wait(f"SparkApplication {name} finished", final, timeout, 3)
    except MissionError as e:
        status = application(m, name).get("status") or {}
        driver = (status.get("driverInfo") or {}).get("podName") or f"{name}-driver"
        raise MissionError(f"{e}\nSparkApplication status: {json.dumps(status)}\n"
                           f"{m.spark_log_tails(driver)}") from e


def lag_total(m: Mission, driver: str) -> tuple[float, float] | None:
    """(records behind latest, last batch id) from the driver's Prometheus endpoint, through
    the API server's pod proxy (as a scrape would reach the pod); None while it does not
    answer (the driver starting)."""
    try:
        text = pod_get(m.kube, m.ns, driver, "/metrics", port=METRICS_PORT)
    except (ApiError, OSError):
        return None
    total = gauge(text, "rillet_spark_offsets_behind_latest_total")
    batch = gauge(text, "rillet_spark_last_batch_id")
    return None if total is None or batch is None else (total, batch)


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
