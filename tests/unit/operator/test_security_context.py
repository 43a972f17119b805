"""Broker pods under the restricted Pod Security Standard by default, the CR's security
contexts and resources replacing the defaults (builders/security_context.py)."""
from __future__ import annotations

from rillet_operator.builders import cluster as b
from rillet_operator.spec import parse_cluster
from tests.pod_security import restricted_violations

CID = "MkU3OEVBNTcwNTJENDM2Qg"
def cluster(**over) -> dict:
    raw = {"replicas": 3, "rack": {"topologyKey": "topology.kubernetes.io/zone"},
           "storage": {"type": "persistent-claim", "size": "1Gi"}, **over}
    return b.statefulset(parse_cluster("events", "prod", raw), CID, admin_http=True)


def pod_of(sts: dict) -> dict:
    return sts["spec"]["template"]["spec"]


def test_by_default_every_container_meets_the_restricted_standard() -> None:
    pod = pod_of(cluster())
    assert restricted_violations(pod) == []
    assert len(pod["initContainers"]) == 1   # the rack lookup is held to it too
    broker = pod["containers"][0]
    assert broker["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in broker["volumeMounts"]
    assert pod["securityContext"]["fsGroup"] == 1001   # the claim writable by the broker


def test_the_checker_sees_a_pod_that_would_be_refused() -> None:
    pod = pod_of(cluster(template={"pod": {"securityContext": {"runAsUser": 0}},
                                   "brokerContainer": {"securityContext": {}}}))
    found = restricted_violations(pod)
    assert "broker: runAsNonRoot not true" in found and "broker: runAsUser 0" in found
    assert "broker: allowPrivilegeEscalation not false" in found


def test_the_crs_security_contexts_replace_the_defaults_whole() -> None:
    mine = {"runAsUser": 1000720000, "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"}}
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod = pod_of(cluster(template={"pod": {"securityContext": mine},
                                   "brokerContainer": {"securityContext": container}}))
    assert pod["securityContext"] == mine
    assert pod["containers"][0]["securityContext"] == container
    assert pod["initContainers"][0]["securityContext"] == container
    assert restricted_violations(pod) == []


def test_resources_default_to_a_small_broker_and_the_cr_replaces_them() -> None:
    broker = pod_of(cluster())["containers"][0]
    assert broker["resources"]["limits"]["memory"] == "1Gi"
    assert broker["resources"]["requests"]["memory"] == "256Mi"
    assert "cpu" not in broker["resources"]["limits"]   # no CPU throttling by default
    mine = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    assert pod_of(cluster(resources=mine))["containers"][0]["resources"] == mine
