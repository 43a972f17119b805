"""SparkApplications for the e2e suite, built from spark/k8s/sparkapplication.yaml: pure
functions from plain values to the object the Spark operator is given (no API calls), so what
the tests submit is unit-tested without a cluster (test_spark_application_logic.py, which also
checks it against the Spark operator's CRD).

A secured Cluster is read as spark/k8s/sparkapplication.yaml's comment says: the User's Secret
(and, for SCRAM, the Cluster's CA Secret) mounted into driver and executors through the
operator's `secrets:` field, the job told only the folders (`--user-secret-dir`, `--ca-file`),
so no credential is in the application, its pods' specs or a command line.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Mapping, Sequence

import yaml

REPO = Path(__file__).resolve().parents[1]
USER_MOUNT = "/etc/rillet/user"
CA_MOUNT = "/etc/rillet/cluster-ca"
METRICS_PORT = 9090   # the yaml's --metrics-port, the driver's port "metrics"
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "SUBMISSION_FAILED"})


def base() -> dict:
    """spark/k8s/sparkapplication.yaml, as a user applies it."""
    return yaml.safe_load((REPO / "spark" / "k8s" / "sparkapplication.yaml").read_text())


def with_arguments(args: Sequence[str], values: Mapping[str, str],
                   flags: Sequence[str] = ()) -> list[str]:
    """The job's arguments with each `--option value` of `values` set (replaced where the
    option is there, appended where not) and each flag (an option without a value) added."""
    out = list(args)
    for name, value in values.items():
        if name in out:
            out[out.index(name) + 1] = value
        else:
            out += [name, value]
    return out + [f for f in flags if f not in out]


def with_user_secret(app: dict, user_secret: str, ca_secret: str | None = None) -> dict:
    """`app` reading as a rillet User: its Secret (and the CA Secret, needed for SCRAM; a tls
    User's Secret has ca.crt) mounted into driver and executors, the job given the folders."""
    app = copy.deepcopy(app)
    secrets = [{"name": user_secret, "path": USER_MOUNT, "secretType": "Generic"}]
    args = {"--user-secret-dir": USER_MOUNT}
    if ca_secret:
        secrets.append({"name": ca_secret, "path": CA_MOUNT, "secretType": "Generic"})
        args["--ca-file"] = f"{CA_MOUNT}/ca.crt"
    for role in ("driver", "executor"):
        app["spec"][role]["secrets"] = copy.deepcopy(secrets)
    app["spec"]["arguments"] = with_arguments(app["spec"]["arguments"], args)
    return app


def listener_bootstrap(cluster_status: Mapping, authentication: str) -> str:
    """The bootstrap address of the Cluster's listener with this authentication
    (status.listeners: name, tls, authentication, bootstrapServers)."""
    for listener in cluster_status.get("listeners") or ():
        if listener.get("authentication") == authentication and listener.get("tls"):
            return listener["bootstrapServers"]
    raise LookupError(f"no TLS listener with authentication {authentication!r} in "
                      f"status.listeners: {cluster_status.get('listeners')}")


def streaming(app: dict, *, namespace: str, bootstrap: str, topic: str, window: str,
              watermark: str, max_offsets_per_trigger: int | None = None) -> dict:
    """`app` (restartPolicy Always: the Spark operator keeps it running) on this Cluster and
    topic; a batch reads at most max_offsets_per_trigger records (None: the manifest's cap)."""
    app = copy.deepcopy(app)
    app["metadata"]["namespace"] = namespace
    values = {"--bootstrap-servers": bootstrap, "--topics": topic, "--window": window,
              "--watermark": watermark}
    if max_offsets_per_trigger is not None:
        values["--max-offsets-per-trigger"] = str(max_offsets_per_trigger)
    app["spec"]["arguments"] = with_arguments(app["spec"]["arguments"], values)
    return app


def run_once(app: dict, *, name: str, namespace: str, bootstrap: str, topic: str,
             data_dir: str, window: str, watermark: str) -> dict:
    """`app` as a one-off run: it reads what the topic holds (--available-now), writes under
    data_dir on the claim and ends; never restarted, so a failure stays a failure."""
    app = copy.deepcopy(app)
    app["metadata"]["name"] = name
    app["metadata"]["namespace"] = namespace
    app["spec"]["restartPolicy"] = {"type": "Never"}
    app["spec"]["arguments"] = with_arguments(app["spec"]["arguments"], {
        "--bootstrap-servers": bootstrap, "--topics": topic, "--output": f"{data_dir}/out",
        "--checkpoint": f"{data_dir}/checkpoint", "--window": window,
        "--watermark": watermark}, flags=["--available-now"])
    return app


def gauge(metrics_text: str, name: str) -> float | None:
    """The value of an unlabelled gauge in Prometheus' text format; None when absent."""
    for line in metrics_text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == name:
            return float(fields[1])
    return None
