"""The whole mission on Kubernetes, one step per method: a Cluster over three zones, a Topic,
the sample producer streaming acks=all events, the Spark job's claim and role (the job itself is
a SparkApplication: spark_operator.py), scaling and a rolling restart under load, and the Spark
output read back.

test_mission.py drives these steps and asserts on what they return; `make demo` (e2e/demo)
drives the same steps and prints them. Nothing here asserts: a step waits for its condition
(bounded) and raises MissionError with what it saw when the condition does not come.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from localk8s.kube import ApiError, Kube
from localk8s.testing import RESTRICTED_CONTAINER, RESTRICTED_POD, restricted_namespace

REPO = Path(__file__).resolve().parents[1]
# rillet_spark (the job's package, spark/): its event sequences give the expected output
sys.path.insert(0, str(REPO / "spark"))
SPARK_IMAGE = "rillet/spark:dev"
CR = "/apis/rillet.io/v1alpha1/namespaces/{ns}/{plural}"
DATA_CLAIM = "rillet-spark-data"
PROGRESS_EVERY_S = 15.0   # a long wait says where it is this often


class MissionError(RuntimeError):
    pass


@dataclass(frozen=True)
class StreamPlan:
    """The producer's events: the same arguments give the same events, so the expected
    aggregates follow from how many were produced (rillet_spark.produce.stream_events)."""

    rate: float = 20.0
    step_ms: int = 50        # 20 events/s x 50 ms: event time runs about as fast as real time
    keys: int = 5
    seed: int = 7
    window: str = "10 seconds"
    watermark: str = "5 minutes"   # room for records delayed by retries through restarts


@dataclass
class Mission:
    kube: Kube
    kubeconfig: str
    ns: str
    cluster: str = "events"
    topic: str = "events"
    report: Callable[[str], None] = print
    plan: StreamPlan = field(default_factory=StreamPlan)

    # --- small helpers -------------------------------------------------------------------

    def _cr(self, plural: str, name: str | None = None) -> str:
        return CR.format(ns=self.ns, plural=plural) + (f"/{name}" if name else "")

    def get_cr(self, plural: str, name: str) -> dict | None:
        try:
            return self.kube.request("GET", self._cr(plural, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def patch_cluster(self, spec: dict) -> None:
        self.kube.request("PATCH", self._cr("clusters", self.cluster), {"spec": spec},
                          content_type="application/merge-patch+json")

    def wait(self, what: str, check: Callable[[], Any], timeout: float,
             interval: float = 1.0) -> Any:
        """Polls ``check`` until it answers (bounded); every PROGRESS_EVERY_S reports how long
        it has waited and what the Cluster's status says it is doing."""
        started = last = time.monotonic()

        def check_and_report() -> Any:
            nonlocal last
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                last = now
                self.report(f"... {what}: {now - started:.0f}s so far; {self.doing()}")
            return check()
        try:
            return self.kube.wait_for(what, check_and_report, timeout, interval)
        except Exception as e:  # noqa: BLE001 - re-raised with the state that matters
            raise MissionError(f"{what}: {e}\ncluster status: {json.dumps(self.status())}") from e

    def status(self) -> dict:
        return (self.get_cr("clusters", self.cluster) or {}).get("status") or {}

    def doing(self) -> str:
        """One line of the Cluster's status: brokers ready, and its Ready condition's reason
        and message (which say, e.g., how many partitions of a move are done)."""
        try:
            st = self.status()
        except (ApiError, OSError) as e:
            return f"status unreadable ({e})"
        ready = next((c for c in st.get("conditions") or () if c.get("type") == "Ready"), {})
        return (f"{st.get('readyBrokers', 0)} brokers ready; {ready.get('reason', '-')}: "
                f"{ready.get('message', '')}".rstrip(": "))

    def kubectl(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", *args], env={**os.environ, "KUBECONFIG": self.kubeconfig},
                              capture_output=True, text=True, timeout=timeout)

    # --- the Cluster and its Topic -----------------------------------------------------------

    def create_namespace(self) -> None:
        if self.kube.get_or_none("Namespace", self.ns) is None:
            self.kube.create(restricted_namespace(self.ns))
        self.wait(f"service account default in {self.ns}",
                  lambda: self.kube.get_or_none("ServiceAccount", "default", self.ns), 60)

    def create_cluster(self, replicas: int = 3) -> dict:
        self.kube.request("POST", self._cr("clusters"), {
            "apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": self.cluster, "namespace": self.ns},
            "spec": {"replicas": replicas, "rack": {"topologyKey": "topology.kubernetes.io/zone"},
                     "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
                     "config": {"min.insync.replicas": 2, "default.replication.factor": 3,
                                "auto.create.topics.enable": False},
                     "rebalance": {"throttleBytesPerSecond": 10 * 1024 * 1024}}})
        return self.wait_settled(replicas, timeout=480)

    def create_topic(self, name: str, partitions: int = 6, replicas: int = 3,
                     config: dict | None = None) -> dict:
        self.kube.request("POST", self._cr("topics"), {
            "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"cluster": self.cluster, "partitions": partitions, "replicas": replicas,
                     "config": config or {}}})
        return self.wait(f"Topic {name} Ready", lambda: (lambda t: t if _ready(t) else None)(
            self.get_cr("topics", name)), 180)

    def settled(self, replicas: int) -> dict | None:
        c = self.get_cr("clusters", self.cluster) or {}
        st = c.get("status") or {}
        ok = (_ready(c) and st.get("readyBrokers") == replicas
              and (st.get("scaling") or {}).get("phase") in (None, "Done")
              and (st.get("rebalance") or {}).get("phase") in (None, "Done", "Idle")
              and (st.get("roll") or {}).get("phase") in (None, "Done"))
        return c if ok else None

    def wait_settled(self, replicas: int, timeout: float = 900) -> dict:
        return self.wait(f"Cluster {self.cluster} Ready with {replicas} brokers",
                         lambda: self.settled(replicas), timeout, interval=2)

    def scale(self, replicas: int) -> dict:
        """spec.replicas -> replicas, then wait until brokers, moves and status settle."""
        t0 = time.monotonic()
        self.patch_cluster({"replicas": replicas})
        c = self.wait_settled(replicas)
        rb = c["status"].get("rebalance") or {}
        self.report(f"scaled to {replicas} brokers in {time.monotonic() - t0:.0f} s: "
                    f"{rb.get('total', 0)} partitions moved, {rb.get('replicaMoves', 0)} replica "
                    f"moves (minimum {rb.get('minimumMoves', 0)})")
        return c

    def broker_uids(self) -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.kube.list(
            "Pod", self.ns, labelSelector=f"rillet.io/cluster={self.cluster}")}

    def roll_with_config(self, config: dict) -> dict:
        """A config change that needs restarts: waits for the roll to finish."""
        t0 = time.monotonic()
        before = self.broker_uids()
        self.patch_cluster({"config": config})
        c = self.wait("rolling restart done", lambda: (lambda c: c if c and (
            c["status"].get("roll") or {}).get("phase") == "Done" and all(
            before[p] != u for p, u in self.broker_uids().items()) else None)(
            self.settled(len(before))), 900, interval=2)
        self.report(f"rolled {len(before)} brokers one by one in {time.monotonic() - t0:.0f} s "
                    f"(order {c['status']['roll'].get('order')})")
        return c

    def bootstrap(self) -> str:
        return self.status()["bootstrapServers"]

    # --- the producer -----------------------------------------------------------------------

    def start_producer(self) -> str:
        """The sample producer as a Job (Spark image): events at plan.rate until the topic
        <topic>-stop exists, then the flush event; one RESULT line at the end."""
        p = self.plan
        name = f"producer-{uuid.uuid4().hex[:5]}"
        self.kube.create({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": name, "namespace": self.ns},
                          "spec": {"backoffLimit": 0, "template": {"spec": {
                              "restartPolicy": "Never", "securityContext": RESTRICTED_POD,
                              "containers": [{
                                  "name": "producer", "image": SPARK_IMAGE,
                                  "imagePullPolicy": "IfNotPresent",
                                  "securityContext": RESTRICTED_CONTAINER,
                                  "command": ["python3", "-m", "rillet_spark.produce",
                                              "--bootstrap-servers", self.bootstrap(),
                                              "--topic", self.topic, "--rate", str(p.rate),
                                              "--step-ms", str(p.step_ms), "--keys", str(p.keys),
                                              "--seed", str(p.seed),
                                              "--stop-topic", f"{self.topic}-stop",
                                              "--flush-event"]}]}}}})
        self.report(f"producer Job {name} streams {p.rate:g} events/s into {self.topic}")
        return name

    def sent(self, job: str) -> int:
        """Events the producer Job reported sent so far (its progress line every 10 s)."""
        pods = self.kube.list("Pod", self.ns, labelSelector=f"job-name={job}")
        if not pods:
            return 0
        try:
            log = self.kube.logs(pods[0]["metadata"]["name"], self.ns, "producer")
        except ApiError:
            return 0   # not started yet
        lines = [l for l in log.splitlines() if l.startswith("progress: ")]
        return int(lines[-1].split()[1]) if lines else 0

    def stop_producer(self, job: str) -> dict:
        self.create_topic(f"{self.topic}-stop", partitions=1, replicas=1)
        return self.job_result(job, "producer", timeout=420)

    def job_result(self, job: str, container: str, timeout: float) -> dict:
        """The RESULT line of a Job that succeeded, decoded."""
        log = self.job_log(job, container, timeout)
        lines = [l for l in log.splitlines() if l.startswith("RESULT ")]
        if not lines:
            raise MissionError(f"Job {job} printed no RESULT line:\n{log[-4000:]}")
        return json.loads(lines[-1][len("RESULT "):])

    def job_log(self, job: str, container: str, timeout: float) -> str:
        """The log of a Job once it succeeded; MissionError with its tail when it failed."""
        def finished() -> dict | None:
            st = self.kube.get("Job", job, self.ns).get("status") or {}
            return st if st.get("succeeded") or st.get("failed") else None
        st = self.wait(f"Job {job} finished", finished, timeout, interval=2)
        pod = self.kube.list("Pod", self.ns, labelSelector=f"job-name={job}")[0]
        log = self.kube.logs(pod["metadata"]["name"], self.ns, container)
        if not st.get("succeeded"):
            raise MissionError(f"Job {job} failed:\n{log[-4000:]}")
        return log

    # --- Spark on Kubernetes ------------------------------------------------------------------

    def prepare_spark(self) -> None:
        """The driver's service account and role, and the claim for output and checkpoint:
        ReadWriteMany, in the StorageClass labelled rillet.io/read-write-many=true when the
        cluster has one (kind: e2e/kind.sh's "shared"), else the default class."""
        out = self.kubectl("apply", "-n", self.ns, "-f", str(REPO / "spark" / "k8s" / "rbac.yaml"))
        if out.returncode != 0:
            raise MissionError(f"kubectl apply rbac.yaml: {out.stderr}")
        claim = yaml.safe_load((REPO / "spark" / "k8s" / "pvc.yaml").read_text())
        shared = self.kube.list("StorageClass", labelSelector="rillet.io/read-write-many=true")
        if shared:
            claim["spec"]["storageClassName"] = shared[0]["metadata"]["name"]
        out = subprocess.run(["kubectl", "apply", "-n", self.ns, "-f", "-"], input=json.dumps(claim),
                             env={**os.environ, "KUBECONFIG": self.kubeconfig},
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise MissionError(f"kubectl apply pvc.yaml: {out.stderr}")

    def batches(self, driver: str) -> int:
        """Micro-batches the driver logged as committed (rillet_spark.job's progress lines)."""
        try:
            log = self.kube.logs(driver, self.ns)
        except ApiError:
            return 0
        return sum(1 for l in log.splitlines() if l.startswith("progress: batch "))

    def wait_batches(self, driver: str, at_least: int, timeout: float = 300) -> int:
        def counted() -> int | None:
            n = self.batches(driver)
            if n >= at_least:
                return n
            # A driver that ended will log no more batches: say so now, not at the timeout.
            pod = self.kube.get_or_none("Pod", driver, self.ns) or {}
            phase = pod.get("status", {}).get("phase")
            if phase in ("Failed", "Succeeded"):
                raise MissionError(f"the Spark driver {driver} ended ({phase}) after {n} "
                                   f"micro-batches, short of {at_least}")
            return None

        try:
            return self.wait(f"{at_least} micro-batches by {driver}", counted, timeout,
                             interval=3)
        except MissionError as e:
            # A stalled job is diagnosed from its own logs: keep them in the failure.
            raise MissionError(f"{e}\n{self.spark_log_tails(driver)}") from e

    def spark_log_tails(self, driver: str, lines: int = 60) -> str:
        """The last lines of the driver's, its executors' and the brokers' logs (for a failure
        message)."""
        names = [driver]
        out = []
        for selector in ("spark-role=executor", f"rillet.io/cluster={self.cluster}"):
            try:
                names += [p["metadata"]["name"] for p in self.kube.list(
                    "Pod", self.ns, labelSelector=selector)]
            except ApiError as e:
                out.append(f"--- pods {selector}: not listed ({e}) ---")
        for name in names:
            try:
                tail = self.kube.logs(name, self.ns).splitlines()[-lines:]
            except ApiError as e:
                tail = [f"(log unreadable: {e})"]
            out.append(f"--- {name} (last {lines} lines) ---\n" + "\n".join(tail))
        return "\n".join(out)

    def kill_driver(self, driver: str) -> None:
        """Deletes the driver pod as a failure would; its executors go with it (owned). Gone
        means no pod of that name, or a new one of the same name (the Spark operator names
        the driver after its application)."""
        uid = self.kube.get("Pod", driver, self.ns)["metadata"]["uid"]
        self.kube.delete("Pod", driver, self.ns)
        self.wait(f"driver {driver} gone", lambda: (lambda pod: pod is None or pod["metadata"][
            "uid"] != uid)(self.kube.get_or_none("Pod", driver, self.ns)), 180, interval=2)
        self.report(f"Spark driver {driver} deleted mid-stream")

    def wait_windows_written(self, driver: str, produced: int, timeout: float = 300) -> int:
        """Waits until a batch of `driver` reports a watermark past the last expected window
        (the watermark a batch reports is the one it evicted windows with: that batch wrote
        them); returns that batch's number."""
        last_end = expected_rows(produced, self.plan)[-1][1]

        def past_last_window() -> int | None:
            log = self.kube.logs(driver, self.ns)
            marks = re.findall(r"progress: batch (\d+), \d+ input rows, watermark (\S+),", log)
            past = [int(b) for b, w in marks if w != "-" and w[:19] >= last_end[:19]]
            return past[0] if past else None
        return self.wait("the watermark past the last window", past_last_window, timeout, 3)

    def read_output(self, path: str = "/data/out") -> list[list]:
        """The documented way to read the rows: rillet_spark.show in a Job with the claim
        (mounted at /data)."""
        name = f"show-{uuid.uuid4().hex[:5]}"
        self.kube.create({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": name, "namespace": self.ns},
                          "spec": {"backoffLimit": 0, "template": {"spec": {
                              "restartPolicy": "Never", "securityContext": RESTRICTED_POD,
                              "volumes": [{"name": "data", "persistentVolumeClaim": {
                                  "claimName": DATA_CLAIM}}],
                              "containers": [{
                                  "name": "show", "image": SPARK_IMAGE,
                                  "imagePullPolicy": "IfNotPresent",
                                  "securityContext": RESTRICTED_CONTAINER,
                                  "command": ["python3", "-m", "rillet_spark.show", path,
                                              "--json"],
                                  "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}})
        return self.job_result(name, "show", timeout=300)["rows"]


def _ready(obj: dict | None) -> bool:
    st = (obj or {}).get("status") or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or ()) \
        and st.get("observedGeneration") == (obj or {}).get("metadata", {}).get("generation")


def expected_rows(produced: int, plan: StreamPlan) -> list[list]:
    """The windows the job must have written for the first `produced` events of the plan
    (the flush event's own window stays open, as the job's watermark leaves it)."""
    import itertools
    from rillet_spark.produce import stream_events
    events = itertools.islice(stream_events(plan.keys, step_ms=plan.step_ms, seed=plan.seed),
                              produced)
    return aggregate_rows(events, plan.window)


def aggregate_rows(events: Iterable, window: str) -> list[list]:
    """The rows `rillet_spark.show --json` prints for these events (rillet_spark.produce
    Events) in tumbling windows of `window`, in its order (window start, key)."""
    from rillet_spark.produce import expected_aggregates
    seconds = _seconds(window)
    rows = []
    for (start, key), (n, total, lo, hi) in sorted(expected_aggregates(events, seconds).items()):
        end = start.timestamp() + seconds
        rows.append([_iso(start.timestamp()), _iso(end), key, n, total, lo, hi])
    return rows


def _seconds(duration: str) -> int:
    n, unit = duration.split()
    return int(n) * {"second": 1, "seconds": 1, "minute": 60, "minutes": 60}[unit]


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
