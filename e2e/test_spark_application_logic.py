"""Pure pieces of the Spark e2e (no cluster): the SparkApplications test_mission.py and
test_spark_secured.py submit, checked against the Spark operator's own CRD (from its chart at
the pinned version, spark/operator/VERSION) as the API server's strict field validation would,
and against the restricted Pod Security Standard; the Secret wiring; the lag gauge's parsing."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

import spark_operator
from localk8s.crd_schema import version_schema, violations
from spark_application import (CA_MOUNT, USER_MOUNT, base, gauge, listener_bootstrap, run_once,
                               streaming, with_arguments, with_user_secret)

STATUS = {"listeners": [
    {"name": "scram", "tls": True, "authentication": "scram-sha-512",
     "bootstrapServers": "secure-bootstrap.ns.svc.cluster.local:9094"},
    {"name": "mtls", "tls": True, "authentication": "tls",
     "bootstrapServers": "secure-bootstrap.ns.svc.cluster.local:9095"}]}


@pytest.fixture(scope="module")
def schema() -> dict:
    """spec of SparkApplication v1beta2 in the chart's CRD (the chart is in the Go module
    e2e/build-k8s fetches for the e2e; $SPARK_OPERATOR_CHART names another copy of it)."""
    crd = Path(spark_operator.chart_dir()) / "crds" / "sparkoperator.k8s.io_sparkapplications.yaml"
    return version_schema(yaml.safe_load(crd.read_text()), "v1beta2")


def _secured(user: str, authentication: str, ca_secret: str | None) -> dict:
    return run_once(with_user_secret(base(), user, ca_secret), name="read-x", namespace="ns",
                    bootstrap=listener_bootstrap(STATUS, authentication), topic="orders",
                    data_dir="/data/read-x", window="1 minute", watermark="30 seconds")


def _mission() -> dict:
    return streaming(base(), namespace="ns", bootstrap="b:9092", topic="events",
                     window="10 seconds", watermark="5 minutes", max_offsets_per_trigger=200)


APPS = {"mission": _mission, "scram": lambda: _secured("alice", "scram-sha-512", "c-ca"),
        "mtls": lambda: _secured("carol", "tls", None)}


@pytest.mark.parametrize("which", sorted(APPS))
def test_the_applications_submitted_are_valid_for_the_spark_operators_crd(schema, which):
    assert violations(APPS[which](), schema) == []


def test_the_crd_check_finds_a_misplaced_field_a_wrong_type_and_a_bad_enum(schema):
    app = _secured("alice", "scram-sha-512", "c-ca")
    app["spec"]["driver"]["secret"] = app["spec"]["driver"].pop("secrets")   # typo: dropped
    app["spec"]["executor"]["instances"] = "1"
    app["spec"]["restartPolicy"]["type"] = "Sometimes"
    del app["spec"]["mainApplicationFile"]
    assert sorted(violations(app, schema)) == [
        ".spec.driver.secret: unknown field",
        ".spec.executor.instances: '1' is not of type integer",
        ".spec.mainApplicationFile: required",
        ".spec.restartPolicy.type: 'Sometimes' is not one of ['Never', 'Always', 'OnFailure']"]


@pytest.mark.parametrize("which", sorted(APPS))
def test_driver_and_executors_are_set_up_for_the_restricted_pod_security_standard(which):
    spec = APPS[which]()["spec"]
    for role in ("driver", "executor"):
        pod, container = spec[role]["podSecurityContext"], spec[role]["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, pod
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, pod
        assert container["allowPrivilegeEscalation"] is False, container
        assert container["capabilities"] == {"drop": ["ALL"]}, container
        assert not container.get("privileged"), container


def test_a_scram_user_and_the_ca_are_mounted_in_driver_and_executors_and_named_as_folders():
    app = _secured("alice", "scram-sha-512", "secure-cluster-ca-cert")
    spec = app["spec"]
    wanted = [{"name": "alice", "path": USER_MOUNT, "secretType": "Generic"},
              {"name": "secure-cluster-ca-cert", "path": CA_MOUNT, "secretType": "Generic"}]
    assert spec["driver"]["secrets"] == wanted and spec["executor"]["secrets"] == wanted
    args = spec["arguments"]
    assert args[args.index("--user-secret-dir") + 1] == USER_MOUNT
    assert args[args.index("--ca-file") + 1] == f"{CA_MOUNT}/ca.crt"
    assert args[args.index("--bootstrap-servers") + 1] == \
        "secure-bootstrap.ns.svc.cluster.local:9094"
    assert args[-1] == "--available-now" and spec["restartPolicy"] == {"type": "Never"}
    assert args[args.index("--output") + 1] == "/data/read-x/out"
    assert args[args.index("--checkpoint") + 1] == "/data/read-x/checkpoint"
    assert (app["metadata"]["name"], app["metadata"]["namespace"]) == ("read-x", "ns")


def test_a_tls_user_needs_only_its_own_secret_which_carries_the_ca():
    spec = _secured("carol", "tls", None)["spec"]
    assert spec["driver"]["secrets"] == [{"name": "carol", "path": USER_MOUNT,
                                          "secretType": "Generic"}]
    assert "--ca-file" not in spec["arguments"]
    assert spec["arguments"][spec["arguments"].index("--bootstrap-servers") + 1].endswith(":9095")


def test_the_builders_leave_the_manifest_they_start_from_alone():
    app = base()
    before = copy.deepcopy(app)
    run_once(with_user_secret(app, "alice", "c-ca"), name="n", namespace="ns", bootstrap="b",
             topic="t", data_dir="/d", window="1 minute", watermark="30 seconds")
    assert app == before


def test_arguments_are_replaced_in_place_appended_when_missing_and_flags_added_once():
    args = ["--topics", "a", "--window", "1 minute"]
    assert with_arguments(args, {"--topics": "b", "--timeout": "60"}, ["--available-now"]) == [
        "--topics", "b", "--window", "1 minute", "--timeout", "60", "--available-now"]
    assert with_arguments(["--available-now"], {}, ["--available-now"]) == ["--available-now"]


def test_the_listener_is_found_by_the_users_authentication():
    assert listener_bootstrap(STATUS, "tls").endswith(":9095")
    with pytest.raises(LookupError, match="scram-sha-256"):
        listener_bootstrap(STATUS, "scram-sha-256")


def test_the_mission_application_keeps_restarting_and_caps_its_batches():
    spec = _mission()["spec"]
    args = spec["arguments"]
    assert spec["restartPolicy"]["type"] == "Always"
    assert args[args.index("--max-offsets-per-trigger") + 1] == "200"
    assert args[args.index("--metrics-port") + 1] == "9090"
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in spec["driver"]["ports"]
    default = streaming(base(), namespace="ns", bootstrap="b:9092", topic="events",
                        window="10 seconds", watermark="5 minutes")["spec"]["arguments"]
    assert default[default.index("--max-offsets-per-trigger") + 1] == "10000"   # the manifest's


def test_the_lag_gauge_is_read_from_prometheus_text():
    text = ("# HELP rillet_spark_offsets_behind_latest_total Records ...\n"
            "# TYPE rillet_spark_offsets_behind_latest_total gauge\n"
            'rillet_spark_offsets_behind_latest{partition="0",topic="events"} 7.0\n'
            "rillet_spark_offsets_behind_latest_total 12.0\n"
            "rillet_spark_last_batch_id 4.0\n")
    assert gauge(text, "rillet_spark_offsets_behind_latest_total") == 12.0
    assert gauge(text, "rillet_spark_last_batch_id") == 4.0
    assert gauge(text, "rillet_spark_offsets_behind_latest") is None


def test_the_spark_operator_watches_the_namespaces_given_or_all():
    def job_namespaces(values: list[str]) -> str:
        return next(v for v in values if v.startswith("spark.jobNamespaces="))
    assert job_namespaces(spark_operator.values(["a", "b"])) == "spark.jobNamespaces={a,b}"
    # helm's --set reads {} as [""]: every namespace, for the chart (its README's way)
    assert job_namespaces(spark_operator.values([])) == "spark.jobNamespaces={}"
