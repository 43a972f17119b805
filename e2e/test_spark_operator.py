"""e2e: the windowed-counts job run the way Spark-on-Kubernetes users run it, as a
SparkApplication (spark/k8s/sparkapplication.yaml) submitted and kept running by the Kubeflow
Spark operator (its chart and our image of it, e2e/spark_operator.py). A Cluster of 3 brokers,
a Topic and the sample producer stream; the application's driver logs micro-batches; its pod is
deleted twice and each time the operator submits the application again by itself (the test
never submits); the new driver resumes from the checkpoint on the claim, and the output holds
every window exactly once.

The steps are e2e/mission.py's (the same Cluster, producer, output reader and expected rows
as test_mission.py). Kind only (e2e/kind.sh up, which loads rillet/spark-operator:dev into the
nodes): the operator's webhook must be reachable from the API server through a Service, which
the local stand-in cluster does not provide.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

import pytest

import spark_operator
from mission import Mission, expected_rows
from test_external_listeners import _nodes_reachable
from test_operator import delete_namespace, operator  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(1800)

APP = "rillet-windowed-counts"
T0 = time.monotonic()


@pytest.fixture(scope="module")
def mission(k8s, operator, helm) -> Iterator[Mission]:  # noqa: F811
    if not all(a.startswith("198.19.255.") for a in _nodes_reachable(k8s.kube)):
        pytest.skip("kind only (e2e/kind.sh up): the Spark operator's image is loaded there and "
                    "its webhook needs Service routing from the API server")
    m = Mission(k8s.kube, k8s.kubeconfig, f"e2e-sparkop-{uuid.uuid4().hex[:5]}",
                cluster="sparkop", topic="events",
                report=lambda line: print(f"\nspark-operator: {line}", flush=True))
    m.create_namespace()
    try:
        print("\n" + spark_operator.install(k8s.kube, helm, k8s.kubeconfig, [m.ns]), flush=True)
        yield m
    finally:
        print(f"\ntotal {time.monotonic() - T0:.0f} s")
        delete_namespace(k8s.kube, m.ns)
        spark_operator.uninstall(k8s.kube, helm, k8s.kubeconfig)


@pytest.fixture(scope="module")
def state() -> dict:
    return {}


def _app_id(m: Mission, driver: str) -> str:
    """The Spark application id of a driver pod (Spark labels its pods with it): a new one per
    submission."""
    return m.kube.get("Pod", driver, m.ns)["metadata"]["labels"]["spark-app-selector"]


def test_the_spark_operator_runs_the_sparkapplication(mission: Mission, state: dict):
    m = mission
    m.create_cluster(3)
    m.create_topic(m.topic, partitions=6, replicas=3, config={"min.insync.replicas": 2})
    m.prepare_spark()
    state["producer"] = m.start_producer()
    spark_operator.apply_application(m)
    driver, uid = spark_operator.running_driver(m, APP)
    state.update(driver=driver, uids={uid}, app_ids=[_app_id(m, driver)])
    assert m.wait_batches(driver, 3, timeout=420) >= 3
    print(f"\nfirst batches after {time.monotonic() - T0:.0f} s")


def test_a_deleted_driver_is_brought_back_by_the_operator_twice(mission: Mission, state: dict):
    m = mission
    for _ in range(2):
        m.kill_driver(state["driver"])
        driver, uid = spark_operator.running_driver(m, APP, frozenset(state["uids"]))
        state["driver"] = driver
        state["uids"].add(uid)
        state["app_ids"].append(_app_id(m, driver))
        # The new driver reads on from the checkpoint: batches again, in its own log.
        assert m.wait_batches(driver, 2, timeout=420) >= 2
    assert m.submissions == 0, "the test submitted nothing itself"
    assert len(set(state["app_ids"])) == 3, state["app_ids"]
    status = spark_operator.application(m, APP)["status"]
    print(f"\nSparkApplication status: {status}")
    assert status["applicationState"]["state"] == "RUNNING", status


def test_the_output_holds_every_window_exactly_once(mission: Mission, state: dict):
    m = mission
    result = m.stop_producer(state["producer"])
    print(f"\nproducer: {result}")
    assert result["failed"] == 0, result
    expected = expected_rows(result["produced"], m.plan)
    batch = m.wait_windows_written(state["driver"], result["produced"])
    rows = m.read_output()
    assert len(rows) == len(expected), (len(rows), len(expected), batch)
    assert rows == expected
