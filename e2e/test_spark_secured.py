"""The windowed-counts job on a secured Cluster, as a SparkApplication run by the Spark operator
(the session's, conftest.py): one Cluster with a SCRAM-SHA-512 listener over TLS and a
mutual-TLS listener, simple authorization; a writer User's producer Job puts a known event set
in the topic; then the same job (spark/k8s/sparkapplication.yaml, one-off: --available-now,
restartPolicy Never) reads it three times (overlapping where the nodes' CPU allows: SUBMITTED)
- over SASL_SSL as a scram-sha-512 User holding only Read on the topic and on the Kafka
  source's groups: the output is exactly the expected windows, and the User's password is in
  neither the driver's log, its pod spec, the application nor the job's ConfigMaps;
- over mutual TLS as a tls User with the same ACLs: the same output;
- as a User without any ACL: the application fails, its driver log says it is not authorized
  to read the topic.
The User Secrets reach driver and executors only through the operator's `secrets:` field
(spark_application.with_user_secret); the job is given folders, never a credential.

Run alone: KUBECONFIG=$(e2e/kind.sh kubeconfig) pytest -q e2e/test_spark_secured.py
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Iterator

import pytest

import spark_operator
from localk8s.kube import ApiError
from localk8s.testing import RESTRICTED_CONTAINER, RESTRICTED_POD
from mission import SPARK_IMAGE, Mission, MissionError, aggregate_rows
from spark_application import (CA_MOUNT, USER_MOUNT, base, listener_bootstrap, run_once,
                               with_user_secret)
from test_operator import _cr_path, condition, delete_namespace, operator  # noqa: F401

pytestmark = pytest.mark.timeout(1800)   # the first test pays for the Cluster too

CLUSTER = "secure"
CA_SECRET = f"{CLUSTER}-cluster-ca-cert"
TOPIC = "orders"
SCRAM, TLS = "scram-sha-512", "tls"
# The Kafka source's own consumer groups are spark-kafka-source-<uuid>...
SPARK_GROUPS = "spark-kafka-source-"
# The events (rillet_spark.produce batch mode; the integration test's set) and the windows.
EVENTS = {"count": 400, "keys": 3, "span_seconds": 300, "seed": 29}
WINDOW, WATERMARK = "1 minute", "30 seconds"
TIMES: dict[str, float] = {}


def _reader_acls() -> dict:
    """Only what the job needs: Read on its topic and on its groups (Read implies Describe)."""
    return {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": TOPIC, "patternType": "literal"},
         "operations": ["Read"]},
        {"resource": {"type": "group", "name": SPARK_GROUPS, "patternType": "prefix"},
         "operations": ["Read"]}]}


USERS = {
    "writer": {"authentication": {"type": SCRAM}, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": TOPIC, "patternType": "literal"},
         "operations": ["Write", "Describe"]}]}},
    "spark-scram": {"authentication": {"type": SCRAM}, "authorization": _reader_acls()},
    "spark-mtls": {"authentication": {"type": TLS}, "authorization": _reader_acls()},
    "spark-nobody": {"authentication": {"type": SCRAM}},
}


def _create(m: Mission, plural: str, kind: str, name: str, spec: dict) -> None:
    m.kube.request("POST", _cr_path(m.ns, plural), {
        "apiVersion": "rillet.io/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": m.ns}, "spec": spec})


def _user_ready(m: Mission, name: str) -> bool:
    return condition(m.get_cr("users", name)).get("status") == "True" and \
        m.kube.get_or_none("Secret", name, m.ns) is not None


def _secret(m: Mission, name: str) -> dict[str, str]:
    data = m.kube.get("Secret", name, m.ns).get("data") or {}
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def _produce(m: Mission, bootstrap: str) -> str:
    """The sample producer as a Job writing EVENTS (and the flush event) as the writer User,
    its Secret and the CA mounted as the job's are; returns its log."""
    name = f"produce-{uuid.uuid4().hex[:5]}"
    args = [f"--{k.replace('_', '-')}={v}" for k, v in EVENTS.items()]
    m.kube.create({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": name, "namespace": m.ns},
                   "spec": {"backoffLimit": 0, "template": {"spec": {
                       "restartPolicy": "Never", "securityContext": RESTRICTED_POD,
                       "volumes": [{"name": "user", "secret": {"secretName": "writer"}},
                                   {"name": "ca", "secret": {"secretName": CA_SECRET}}],
                       "containers": [{
                           "name": "producer", "image": SPARK_IMAGE,
                           "imagePullPolicy": "IfNotPresent",
                           "securityContext": RESTRICTED_CONTAINER,
                           "command": ["python3", "-m", "rillet_spark.produce",
                                       "--bootstrap-servers", bootstrap, "--topic", TOPIC,
                                       *args, "--flush-event",
                                       "--user-secret-dir", USER_MOUNT,
                                       "--ca-file", f"{CA_MOUNT}/ca.crt"],
                           "volumeMounts": [
                               {"name": "user", "mountPath": USER_MOUNT, "readOnly": True},
                               {"name": "ca", "mountPath": CA_MOUNT, "readOnly": True}]}]}}}})
    return m.job_log(name, "producer", timeout=240)


@pytest.fixture(scope="module")
def secured(k8s, operator, spark_operator_release) -> Iterator[Mission]:  # noqa: F811
    t0 = time.monotonic()
    m = Mission(k8s.kube, k8s.kubeconfig, f"e2e-spark-sec-{uuid.uuid4().hex[:5]}",
                cluster=CLUSTER, topic=TOPIC,
                report=lambda line: print(f"\nspark-secured: {line}", flush=True))
    m.create_namespace()
    try:
        _create(m, "clusters", "Cluster", CLUSTER, {
            "replicas": 3, "config": {"min.insync.replicas": 2},
            "storage": {"type": "ephemeral"},
            "listeners": [
                {"name": "scram", "port": 9094, "tls": True,
                 "authentication": {"type": SCRAM}},
                {"name": "mtls", "port": 9095, "tls": True, "authentication": {"type": TLS}}],
            "authorization": {"type": "simple"}})
        m.wait_settled(3, timeout=480)
        m.create_topic(TOPIC, partitions=3, replicas=3)
        for name, spec in USERS.items():
            _create(m, "users", "User", name, {"cluster": CLUSTER, **spec})
        for name in USERS:
            m.wait(f"User {name} Ready with its Secret", lambda: _user_ready(m, name), 180, 2)
        m.prepare_spark()
        log = _produce(m, listener_bootstrap(m.status(), SCRAM))
        assert f"produced {EVENTS['count'] + 1} events" in log, log[-2000:]
        TIMES["secured Cluster, Users, events"] = round(time.monotonic() - t0)
        yield m
    finally:
        print(f"\nspark-secured wall times (s): {TIMES}")
        delete_namespace(k8s.kube, m.ns)


# The applications, submitted once each (name -> when): the refused one runs beside the SCRAM
# one (it ends at its first plan, needing no executor) and the mTLS one starts while the SCRAM
# one's output is read, so the module pays for about two runs, not three.
SUBMITTED: dict[str, float] = {}
RUNS = {"read-scram": ("spark-scram", SCRAM, CA_SECRET),
        # A tls User's Secret carries the CA (ca.crt): no CA Secret, no --ca-file.
        "read-mtls": ("spark-mtls", TLS, None),
        "read-denied": ("spark-nobody", SCRAM, CA_SECRET)}


def _submit(m: Mission, name: str) -> None:
    """The job as the run's User over the listener of its authentication, once."""
    if name in SUBMITTED:
        return
    user, authentication, ca_secret = RUNS[name]
    app = run_once(with_user_secret(base(), user, ca_secret), name=name, namespace=m.ns,
                   bootstrap=listener_bootstrap(m.status(), authentication), topic=TOPIC,
                   data_dir=f"/data/{name}", window=WINDOW, watermark=WATERMARK)
    spark_operator.submit(m, app)
    SUBMITTED[name] = time.monotonic()


def _run(m: Mission, name: str) -> tuple[dict, str, str]:
    """The run to its end (submitted now if it was not): (application status, driver pod
    name, driver log)."""
    _submit(m, name)
    status = spark_operator.finished(m, name)
    driver = (status.get("driverInfo") or {}).get("podName") or f"{name}-driver"
    try:
        log = m.kube.logs(driver, m.ns)
    except ApiError as e:
        raise MissionError(f"driver {driver} of {name}: no log ({e}); status "
                           f"{json.dumps(status)}") from e
    TIMES[name] = round(time.monotonic() - SUBMITTED[name])
    return status, driver, log


def _state(status: dict) -> str:
    return (status.get("applicationState") or {}).get("state", "")


def _expected_rows() -> list[list]:
    from rillet_spark.produce import sample_events   # spark/ is on sys.path (mission.py)
    events = sample_events(EVENTS["count"], EVENTS["keys"],
                           span_seconds=EVENTS["span_seconds"], seed=EVENTS["seed"])
    return aggregate_rows(events, WINDOW)


def _assert_read_exactly(m: Mission, name: str, status: dict, log: str) -> None:
    assert _state(status) == "COMPLETED", f"{json.dumps(status)}\n{log[-4000:]}"
    assert "progress: batch" in log, log[-4000:]
    rows = m.read_output(f"/data/{name}/out")
    expected = _expected_rows()
    assert len(rows) == len(expected), (len(rows), len(expected))
    assert rows == expected


def _assert_restricted_and_mounted(pod: dict, secrets: set[str]) -> None:
    """The driver pod as the restricted standard wants it, the Secrets mounted as volumes."""
    spec = pod["spec"]
    assert spec["securityContext"].get("runAsNonRoot") is True, spec["securityContext"]
    assert spec["securityContext"].get("seccompProfile") == {"type": "RuntimeDefault"}
    for c in spec["containers"]:
        sc = c.get("securityContext") or {}
        assert sc.get("allowPrivilegeEscalation") is False, (c["name"], sc)
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], (c["name"], sc)
    mounted = {v["secret"]["secretName"] for v in spec.get("volumes") or () if "secret" in v}
    assert secrets <= mounted, (secrets, mounted)


def test_the_job_reads_over_sasl_ssl_with_a_read_only_user_and_never_shows_its_password(
        secured: Mission):
    m = secured
    _submit(m, "read-scram")
    _submit(m, "read-denied")
    status, driver, log = _run(m, "read-scram")
    _submit(m, "read-mtls")
    _assert_read_exactly(m, "read-scram", status, log)
    pod = m.kube.get("Pod", driver, m.ns)
    _assert_restricted_and_mounted(pod, {"spark-scram", CA_SECRET})
    password = _secret(m, "spark-scram")["password"]
    assert len(password) >= 16
    seen = {"driver log": log, "driver pod": json.dumps(pod),
            "application": json.dumps(spark_operator.application(m, "read-scram")),
            "config maps": json.dumps(m.kube.list("ConfigMap", m.ns)),
            "executor pods": json.dumps(m.kube.list("Pod", m.ns,
                                                    labelSelector="spark-role=executor"))}
    assert [where for where, text in seen.items() if password in text] == []


def test_the_job_reads_over_mutual_tls_with_a_read_only_user(secured: Mission):
    m = secured
    status, driver, log = _run(m, "read-mtls")
    _assert_read_exactly(m, "read-mtls", status, log)
    _assert_restricted_and_mounted(m.kube.get("Pod", driver, m.ns), {"spark-mtls"})


def test_a_user_without_read_acl_fails_with_an_authorization_error_in_the_driver_log(
        secured: Mission):
    m = secured
    status, driver, log = _run(m, "read-denied")
    assert _state(status) == "FAILED", f"{json.dumps(status)}\n{log[-4000:]}"
    assert f"windowed_counts: not authorized to read topic(s) {TOPIC!r}" in log, log[-4000:]
    assert "progress: batch" not in log, log[-4000:]
