"""The Cluster reconcile pass (handlers/cluster.py, cluster_reconciler.py) over a fake API:
which calls it makes in which order, and what it writes in status, for a new plain cluster,
a refused spec and a failing apply. No sockets: the fake cluster has no pods, so no step dials
a broker."""
from __future__ import annotations

import asyncio
import copy
from typing import Any

import kopf
import pytest

from rillet_operator.handlers import cluster, common
from rillet_operator.kube import ApiError


class FakeKube:
    """The API calls a pass makes, recorded; objects applied are kept, nothing else exists."""

    def __init__(self, fail_apply: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.objects: dict[tuple[str, str], dict] = {("Cluster", "c"): {"status": {}}}
        self.fail_apply = fail_apply

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        self.calls.append(("get", kind, name))
        return copy.deepcopy(self.objects.get((kind, name)))   # a new document, as over HTTP

    def list(self, kind: str, namespace: str | None = None, selector: dict | None = None
             ) -> list[dict]:
        self.calls.append(("list", kind))
        return []

    def patch(self, kind: str, name: str, patch: dict, namespace: str | None = None,
              sub: str | None = None) -> dict:
        self.calls.append(("patch", kind, name, sub))
        if sub == "status":
            merge(self.objects[(kind, name)].setdefault("status", {}), patch["status"])
        return {}

    def apply(self, obj: dict) -> tuple[str, list[str]]:
        self.calls.append(("apply", obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == self.fail_apply:
            raise ApiError(403, f"{obj['kind']} forbidden")
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return "created", []


def merge(into: dict, patch: dict) -> None:
    """A JSON merge patch, as the API server applies one."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "info", lambda obj, reason, message="": posted.append(
        ("Normal", reason)))
    monkeypatch.setattr(kopf, "warn", lambda obj, reason, message="": posted.append(
        ("Warning", reason)))
    return posted


def run(fake: FakeKube, monkeypatch: pytest.MonkeyPatch, spec: dict) -> dict:
    """One pass; the Cluster's status as the pass left it on the (fake) API server."""
    monkeypatch.setattr(common, "_kube", fake)
    body = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": 3}}
    patch = kopf.Patch()
    asyncio.run(cluster.reconcile(body=body, meta=body["metadata"], spec=spec, status={},
                                  name="c", namespace="ns", patch=patch,
                                  logger=_Logger(), memo={}))
    assert "status" not in patch, "the pass wrote its status itself, under its lock"
    return fake.objects[("Cluster", "c")]["status"]


class _Logger:
    def __getattr__(self, _: str) -> Any:
        return lambda *args, **kwargs: None


def ready(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def test_a_new_plain_cluster_is_applied_step_by_step(monkeypatch, events) -> None:
    fake = FakeKube()
    status = run(fake, monkeypatch, {"replicas": 3})
    assert fake.calls == [
        ("get", "Cluster", "c"),                      # the status the last pass wrote
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
        ("patch", "Cluster", "c", "status"),          # the pass's status, under its lock
    ]
    assert len(status["clusterId"]) == 22
    assert status["replicas"] == 3 and status["readyBrokers"] == 0
    assert [b["state"] for b in status["brokers"]] == ["Missing"] * 3
    assert status["bootstrapServers"] == "c-bootstrap.ns.svc.cluster.local:9092"
    assert status["observedGeneration"] == 3
    assert (ready(status)["status"], ready(status)["reason"]) == ("False", "BrokersNotReady")
    assert ("Normal", "Created") in events


def test_a_refused_spec_changes_nothing_but_status(monkeypatch, events) -> None:
    fake = FakeKube()
    status = run(fake, monkeypatch, {"replicas": 3, "config": {"log.segment.bytes": "x"}})
    assert [c[0] for c in fake.calls] == ["get", "get", "patch", "patch"]   # the id, status
    assert ready(status)["reason"] == "InvalidConfig"
    assert "log.segment.bytes" in ready(status)["message"]
    assert ("Warning", "InvalidConfig") in events


def test_a_failing_apply_stops_the_pass_with_apply_failed(monkeypatch, events) -> None:
    fake = FakeKube(fail_apply="Service")
    status = run(fake, monkeypatch, {"replicas": 3})
    assert fake.calls[-2:] == [("apply", "Service", "c-brokers"),
                               ("patch", "Cluster", "c", "status")]
    assert ready(status)["reason"] == "ApplyFailed"
    assert "brokers" not in status


def test_removing_the_listeners_of_running_brokers_is_refused(monkeypatch, events) -> None:
    fake = FakeKube()
    fake.objects[("ConfigMap", "c-config")] = {"data": {"server.properties": (
        "cluster.id=AAAAAAAAAAAAAAAAAAAAAA\ninter.broker.listener.name=REPLICATION\n")}}
    status = run(fake, monkeypatch, {"replicas": 3})
    assert status["clusterId"] == "AAAAAAAAAAAAAAAAAAAAAA"   # kept from the ConfigMap
    assert [c[0] for c in fake.calls] == ["get", "get", "patch", "get", "patch"]
    assert ready(status)["reason"] == "ListenersChangeUnsupported"


def test_a_pass_that_waited_starts_from_the_status_the_last_pass_wrote(monkeypatch) -> None:
    """A timer and a change handler for one Cluster, both handed the same old status by Kopf:
    the second to get the lock must see the first's write (a rolling restart's order once lost
    a restarted broker when the second wrote back the status it had been handed)."""
    fake = FakeKube()
    monkeypatch.setattr(common, "_kube", fake)
    memo: dict = {}
    seen: list[dict] = []

    async def one(append: str) -> None:
        patch = kopf.Patch()
        async with common.one_pass(memo, "Cluster", "c", "ns", {}, patch) as current:
            seen.append(current)
            order = (current.get("roll") or {}).get("order") or []
            await asyncio.sleep(0)   # the other pass queues on the lock meanwhile
            patch.status["roll"] = {"order": [*order, append]}

    async def both() -> None:
        await asyncio.gather(one("b-1"), one("b-2"))

    asyncio.run(both())
    assert seen[1] == {"roll": {"order": ["b-1"]}}
    assert fake.objects[("Cluster", "c")]["status"]["roll"]["order"] == ["b-1", "b-2"]
