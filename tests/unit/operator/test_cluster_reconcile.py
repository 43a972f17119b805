"""The Cluster reconcile pass (handlers/cluster.py, cluster_reconciler.py) over a fake API:
which calls it makes in which order, and what it writes in status, for a new plain cluster,
a refused spec and a failing apply. No sockets: the fake cluster has no pods, so no step dials
a broker."""
from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from rillet_operator.handlers import cluster, common
from rillet_operator.kube import ApiError


class FakeKube:
    """The API calls a pass makes, recorded; objects applied are kept, nothing else exists."""

    def __init__(self, fail_apply: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.objects: dict[tuple[str, str], dict] = {}
        self.fail_apply = fail_apply

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        self.calls.append(("get", kind, name))
        return self.objects.get((kind, name))

    def list(self, kind: str, namespace: str | None = None, selector: dict | None = None
             ) -> list[dict]:
        self.calls.append(("list", kind))
        return []

    def patch(self, kind: str, name: str, patch: dict, namespace: str | None = None,
              sub: str | None = None) -> dict:
        self.calls.append(("patch", kind, name, sub))
        return {}

    def apply(self, obj: dict) -> tuple[str, list[str]]:
        self.calls.append(("apply", obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == self.fail_apply:
            raise ApiError(403, f"{obj['kind']} forbidden")
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return "created", []


class Patch:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {}


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "info", lambda obj, reason, message="": posted.append(
        ("Normal", reason)))
    monkeypatch.setattr(kopf, "warn", lambda obj, reason, message="": posted.append(
        ("Warning", reason)))
    return posted


def run(fake: FakeKube, monkeypatch: pytest.MonkeyPatch, spec: dict) -> Patch:
    monkeypatch.setattr(common, "_kube", fake)
    body = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": 3}}
    patch = Patch()
    asyncio.run(cluster.reconcile(body=body, meta=body["metadata"], spec=spec, status={},
                                  name="c", namespace="ns", patch=patch,
                                  logger=_Logger(), memo={}))
    return patch


class _Logger:
    def __getattr__(self, _: str) -> Any:
        return lambda *args, **kwargs: None


def ready(patch: Patch) -> dict:
    return next(c for c in patch.status["conditions"] if c["type"] == "Ready")


def test_a_new_plain_cluster_is_applied_step_by_step(monkeypatch, events) -> None:
    fake = FakeKube()
    patch = run(fake, monkeypatch, {"replicas": 3})
    assert fake.calls == [
        ("get", "ConfigMap", "c-config"),             # a cluster id kept in a ConfigMap?
        ("patch", "Cluster", "c", "status"),          # the new id, before anything uses it
        ("get", "ConfigMap", "c-config"),             # listeners added to running brokers?
        ("get", "StatefulSet", "c-broker"),           # scaling: nothing runs yet
        ("apply", "ServiceAccount", "c-broker"), ("apply", "ConfigMap", "c-config"),
        ("apply", "Service", "c-brokers"), ("apply", "Service", "c-bootstrap"),
        ("apply", "StatefulSet", "c-broker"), ("apply", "PodDisruptionBudget", "c-broker"),
        ("list", "Pod"),                              # the brokers' state
        ("get", "StatefulSet", "c-broker"),           # a roll to make? no pod to restart
        ("list", "Pod"),
    ]
    assert len(patch.status["clusterId"]) == 22
    assert patch.status["replicas"] == 3 and patch.status["readyBrokers"] == 0
    assert [b["state"] for b in patch.status["brokers"]] == ["Missing"] * 3
    assert patch.status["bootstrapServers"] == "c-bootstrap.ns.svc.cluster.local:9092"
    assert patch.status["observedGeneration"] == 3
    assert (ready(patch)["status"], ready(patch)["reason"]) == ("False", "BrokersNotReady")
    assert ("Normal", "Created") in events


def test_a_refused_spec_changes_nothing_but_status(monkeypatch, events) -> None:
    fake = FakeKube()
    patch = run(fake, monkeypatch, {"replicas": 3, "config": {"log.segment.bytes": "x"}})
    assert [c[0] for c in fake.calls] == ["get", "patch"]   # the cluster id only
    assert ready(patch)["reason"] == "InvalidConfig"
    assert "log.segment.bytes" in ready(patch)["message"]
    assert ("Warning", "InvalidConfig") in events


def test_a_failing_apply_stops_the_pass_with_apply_failed(monkeypatch, events) -> None:
    fake = FakeKube(fail_apply="Service")
    patch = run(fake, monkeypatch, {"replicas": 3})
    assert fake.calls[-1] == ("apply", "Service", "c-brokers")
    assert ready(patch)["reason"] == "ApplyFailed"
    assert "brokers" not in patch.status


def test_removing_the_listeners_of_running_brokers_is_refused(monkeypatch, events) -> None:
    fake = FakeKube()
    fake.objects[("ConfigMap", "c-config")] = {"data": {"server.properties": (
        "cluster.id=AAAAAAAAAAAAAAAAAAAAAA\ninter.broker.listener.name=REPLICATION\n")}}
    patch = run(fake, monkeypatch, {"replicas": 3})
    assert patch.status["clusterId"] == "AAAAAAAAAAAAAAAAAAAAAA"   # kept from the ConfigMap
    assert [c[0] for c in fake.calls] == ["get", "patch", "get"]
    assert ready(patch)["reason"] == "ListenersChangeUnsupported"
