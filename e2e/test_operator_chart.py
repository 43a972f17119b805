"""The operator chart offline: `helm lint` is clean and the values shape what is rendered
(watched namespaces -> RoleBindings and KopfPeerings there instead of cluster-wide ones)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "helm" / "rillet"
sys.path.insert(0, str(REPO))
from tests.pod_security import restricted_violations  # noqa: E402


def _helm(helm: str, *args: str) -> str:
    out = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _render(helm: str, *sets: str, release: str = "r") -> list[dict]:
    args = ["template", release, str(CHART), "--namespace", "ops"]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(_helm(helm, *args)) if d]


def test_chart_lints_clean(helm):
    out = _helm(helm, "lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in out and "[WARNING]" not in out and "[ERROR]" not in out


def test_chart_values_all_namespaces_by_default(helm):
    docs = _render(helm)
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert ("ClusterKopfPeering", "r-rillet") in kinds
    assert ("ClusterRoleBinding", "r-operator") in kinds
    assert not [k for k in kinds if k[0] in ("RoleBinding", "KopfPeering")]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args and "--peering=r-rillet" in args
    # logLevel INFO (the default) is Kopf's default level: no --verbose (DEBUG) nor --debug.
    assert not {"--verbose", "--debug", "--quiet"} & set(args), args
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]
           ["env"]}
    assert env["RILLET_LOG_LEVEL"] == "INFO"


def test_chart_values_watched_namespaces_replicas_and_log_level(helm):
    docs = _render(helm, "watchNamespaces={team-a,team-b}", "replicas=2", "logLevel=DEBUG",
                   "image.tag=1.2.3")
    bindings = {d["metadata"]["namespace"] for d in docs if d["kind"] == "RoleBinding"}
    peerings = {d["metadata"]["namespace"] for d in docs if d["kind"] == "KopfPeering"}
    assert bindings == peerings == {"team-a", "team-b"}
    # Namespaced permissions are not granted cluster-wide.
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"] == \
        ["r-operator-cluster"]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "rillet/operator:1.2.3"
    assert {"--namespace=team-a", "--namespace=team-b", "--verbose"} <= set(container["args"])
    assert {"name": "RILLET_LOG_LEVEL", "value": "DEBUG"} in container["env"]
    assert "--all-namespaces" not in container["args"]


def test_chart_log_level_error_is_quiet_and_named(helm):
    container = next(d for d in _render(helm, "logLevel=error") if d["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]
    assert "--quiet" in container["args"] and "--verbose" not in container["args"]
    assert {"name": "RILLET_LOG_LEVEL", "value": "ERROR"} in container["env"]


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering",
                  "CustomResourceDefinition"}


def test_two_releases_share_no_cluster_scoped_object_but_the_crds(helm):
    """Two operators (each watching its own namespaces) in one Kubernetes cluster: helm
    refuses an object another release owns, so no cluster-scoped name may be fixed; and each
    operator binds brokers to its own release's node-reader role, the one it may bind."""
    names = {}
    for release, ns in (("one", "team-a"), ("two", "team-b")):
        docs = _render(helm, f"watchNamespaces={{{ns}}}", release=release)
        names[release] = {(d["kind"], d["metadata"]["name"]) for d in docs
                          if d["kind"] in CLUSTER_SCOPED and d["kind"] != "CustomResourceDefinition"}
        roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
        env = {e["name"]: e.get("value") for e in next(
            d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
            "containers"][0]["env"]}
        node_reader = env["RILLET_NODE_READER_ROLE"]
        assert roles[node_reader]["rules"] == [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        bindable = [r for role in roles.values() for r in role["rules"] if "bind" in r["verbs"]]
        assert bindable == [{"apiGroups": ["rbac.authorization.k8s.io"],
                             "resources": ["clusterroles"], "verbs": ["bind"],
                             "resourceNames": [node_reader]}]
    assert not names["one"] & names["two"], names["one"] & names["two"]


def test_the_operator_pod_meets_the_restricted_standard_with_a_writable_tmp(helm):
    """Its root filesystem is read-only, yet it writes its client key for ssl: /tmp is an
    in-memory emptyDir (without it every secured Cluster's reconcile fails)."""
    dep = next(d for d in _render(helm) if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
    assert next(v for v in pod["volumes"] if v["name"] == tmp["name"])["emptyDir"]
    mine = _render(helm, "securityContext.runAsUser=1000720000")
    assert next(d for d in mine if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["securityContext"]["runAsUser"] == 1000720000
