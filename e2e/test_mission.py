"""The mission end to end on the suite's Kubernetes (kind): helm install -> a Cluster of 3
brokers over 3 zones -> a Topic (RF=3, min.insync.replicas=2) -> a producer Job streaming a known
event sequence with acks=all (idempotent) -> the windowed-counts job as a SparkApplication
(spark/k8s/sparkapplication.yaml) run by the Kubeflow Spark operator (its chart, our image of it:
e2e/spark_operator.py), output and checkpoint on a claim -> its driver pod deleted twice, each
time brought back by the Spark operator alone (the test never submits), resuming from the
checkpoint -> scale 3 -> 5, a config change that rolls the brokers, scale 5 -> 3, all under the
stream -> the producer stops -> the Spark output equals the expected aggregates exactly, every
window once -> namespace deletion leaves nothing behind.

The steps live in mission.py and spark_operator.py (shared with `make demo`); the tests run in
file order and build on each other's state.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

import pytest

import spark_operator
from mission import Mission, MissionError, expected_rows
from test_operator import delete_namespace, operator  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(1800)

APP = spark_operator.APP
# Records per micro-batch: three times the 100 a 5 s batch sees in steady state (the job keeps
# up), below what is waiting when it starts: the application is submitted once the producer
# sent MAX_OFFSETS, and the events of the half minute or more its submission takes come on top.
MAX_OFFSETS = 300
TIMES: dict[str, float] = {}
T0 = time.monotonic()


@pytest.fixture(scope="module")
def mission(k8s, operator, spark_operator_release) -> Iterator[Mission]:  # noqa: F811
    m = Mission(k8s.kube, k8s.kubeconfig, f"e2e-mission-{uuid.uuid4().hex[:5]}",
                cluster="mission", topic="events",
                report=lambda line: print(f"\nmission: {line}", flush=True))
    m.create_namespace()
    try:
        yield m
    finally:
        TIMES["total"] = round(time.monotonic() - T0)
        print(f"\nmission wall times (s): {TIMES}")
        delete_namespace(k8s.kube, m.ns)


@pytest.fixture(scope="module")
def state() -> dict:
    return {}


def _lag_until(m: Mission, driver: str, wanted, what: str, timeout: float = 420) -> tuple:
    """Polls the driver's lag gauge until `wanted(total)`; returns (total, batch). The failure
    says what the gauge read and what the driver logged."""
    seen: list = []

    def read() -> tuple | None:
        value = spark_operator.lag_total(m, driver)
        if value is not None:
            seen.append(value)
        return value if value is not None and wanted(value[0]) else None
    try:
        found = m.wait(f"the lag gauge of {driver} {what}", read, timeout, 1)
    except MissionError as e:
        raise MissionError(f"{e}\nlast (records behind, batch) read: {seen[-15:]}\n"
                           f"{m.spark_log_tails(driver)}") from e
    m.report(f"lag gauge of {driver}: {found[0]:g} records behind after batch {found[1]:g}")
    return found


def _app_id(m: Mission, driver: str) -> str:
    """The Spark application id of a driver pod (Spark labels its pods with it): a new one per
    submission."""
    return m.kube.get("Pod", driver, m.ns)["metadata"]["labels"]["spark-app-selector"]


def test_cluster_topic_producer_and_spark_application_start(mission: Mission, state: dict):
    m = mission
    m.create_cluster(3)
    topic = m.create_topic(m.topic, partitions=6, replicas=3,
                           config={"min.insync.replicas": 2})
    assert topic["status"]["replicas"] == 3
    m.prepare_spark()
    state["producer"] = m.start_producer()
    m.wait(f"the producer {MAX_OFFSETS} events ahead",
           lambda: m.sent(state["producer"]) >= MAX_OFFSETS, 180, 2)
    spark_operator.apply_application(m, MAX_OFFSETS)
    driver, uid = spark_operator.running_driver(m, APP)
    state.update(driver=driver, uids={uid}, app_ids=[_app_id(m, driver)])
    # The job starts behind the producer: its lag gauge rises above 0.
    state["lag behind"] = _lag_until(m, driver, lambda total: total > 0, "above 0")
    # The job reads: micro-batches with progress lines in the driver's log.
    assert m.wait_batches(driver, 3, timeout=420) >= 3
    TIMES["up to first batches"] = round(time.monotonic() - T0)


def test_a_deleted_driver_is_brought_back_by_the_spark_operator_twice(mission: Mission,
                                                                     state: dict):
    m = mission
    t0 = time.monotonic()
    for _ in range(2):
        m.kill_driver(state["driver"])
        driver, uid = spark_operator.running_driver(m, APP, frozenset(state["uids"]))
        state["driver"] = driver
        state["uids"].add(uid)
        state["app_ids"].append(_app_id(m, driver))
        # The new driver reads on from the checkpoint: batches again, in its own log.
        assert m.wait_batches(driver, 2, timeout=420) >= 2
    assert len(set(state["app_ids"])) == 3, state["app_ids"]
    status = spark_operator.application(m, APP)["status"]
    print(f"\nSparkApplication status: {status}")
    assert status["applicationState"]["state"] == "RUNNING", status
    TIMES["two driver restarts"] = round(time.monotonic() - t0)


def _driver_running(m: Mission, name: str) -> dict:
    pod = m.kube.get("Pod", name, m.ns)
    assert pod["status"]["phase"] == "Running", pod["status"]
    return pod


def test_the_stream_and_the_job_run_through_scaling_and_a_roll(mission: Mission, state: dict):
    m = mission
    driver = state["driver"]
    t0 = time.monotonic()
    m.scale(5)
    TIMES["3->5"] = round(time.monotonic() - t0)
    _driver_running(m, driver)
    t0 = time.monotonic()
    m.roll_with_config({"num.replica.fetchers": 2})
    TIMES["roll of 5"] = round(time.monotonic() - t0)
    _driver_running(m, driver)
    t0 = time.monotonic()
    m.scale(3)
    TIMES["5->3"] = round(time.monotonic() - t0)
    batches = m.batches(driver)
    m.wait_batches(driver, batches + 2, timeout=120)
    pod = _driver_running(m, driver)
    assert all(c.get("restartCount", 0) == 0 for c in pod["status"]["containerStatuses"])
    job = m.kube.get("Job", state["producer"], m.ns)["status"]
    assert job.get("active") == 1, f"the producer streamed all through: {job}"


def test_the_spark_output_is_exactly_the_expected_aggregates(mission: Mission, state: dict):
    m = mission
    result = m.stop_producer(state["producer"])
    state["produced"] = result
    print(f"\nproducer: {result}")
    assert result["failed"] == 0, result
    assert result["produced"] > 1000
    expected = expected_rows(result["produced"], m.plan)
    batch = m.wait_windows_written(state["driver"], result["produced"])
    rows = m.read_output()
    assert len(rows) == len(expected), (len(rows), len(expected), batch)
    assert rows == expected
    # Caught up with a stopped producer: nothing left behind, by the gauge and the log.
    behind, last = _lag_until(m, state["driver"], lambda total: total == 0, "at 0")
    assert state["lag behind"][0] > 0 and behind == 0 and last >= batch, (state["lag behind"],
                                                                          behind, last, batch)
    progress = [l for l in m.kube.logs(state["driver"], m.ns).splitlines()
                if l.startswith("progress: batch ")]
    assert progress and progress[-1].endswith(", behind latest 0"), progress[-3:]
    TIMES["events"] = result["produced"]


def test_namespace_deletion_leaves_nothing_behind(mission: Mission, state: dict):
    m = mission
    t0 = time.monotonic()
    claims = {p["metadata"]["name"] for p in m.kube.list("PersistentVolumeClaim", m.ns)}
    assert "rillet-spark-data" in claims and "data-mission-broker-0" in claims
    rack_binding = f"rillet-{m.ns}-{m.cluster}-broker-rack"
    assert m.kube.get_or_none("ClusterRoleBinding", rack_binding) is not None
    m.kube.delete("Namespace", m.ns)
    m.wait("namespace gone", lambda: m.kube.get_or_none("Namespace", m.ns) is None, 300, 2)
    m.wait("its volumes released", lambda: not [
        pv for pv in m.kube.list("PersistentVolume")
        if (pv["spec"].get("claimRef") or {}).get("namespace") == m.ns], 120, 2)
    assert m.kube.get_or_none("ClusterRoleBinding", rack_binding) is None
    TIMES["namespace deletion"] = round(time.monotonic() - t0)
