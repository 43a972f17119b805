"""rillet.io/pause-reconciliation: the pure condition logic, and a Cluster pass over a fake
API server that, paused, changes nothing but its ReconciliationPaused condition."""
from __future__ import annotations

import asyncio

import kopf
import pytest

from rillet_operator.handlers import cluster, common
from rillet_operator.pause import PAUSE_ANNOTATION, is_paused, pause_conditions
from tests.unit.operator.test_cluster_reconcile import FakeKube, _Logger, events  # noqa: F401

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def _meta(value: str | None) -> dict:
    return {"annotations": {} if value is None else {PAUSE_ANNOTATION: value}}


@pytest.mark.parametrize("value,paused", [("true", True), ("True", True), (" true ", True),
                                          ("false", False), ("yes", False), (None, False)])
def test_only_true_pauses(value: str | None, paused: bool) -> None:
    assert is_paused(_meta(value)) is paused
    assert not is_paused({})


def test_pause_then_resume_sets_the_condition_once_each() -> None:
    ready = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
              "lastTransitionTime": T0}]
    assert pause_conditions(ready, False, T0) is None        # never paused: no condition
    paused = pause_conditions(ready, True, T0)
    assert paused is not None
    cond = next(c for c in paused if c["type"] == "ReconciliationPaused")
    assert (cond["status"], cond["reason"]) == ("True", "ReconciliationPaused")
    assert next(c for c in paused if c["type"] == "Ready") == ready[0]   # left as it was
    assert pause_conditions(paused, True, T1) is None        # already shown
    resumed = pause_conditions(paused, False, T1)
    cond = next(c for c in resumed if c["type"] == "ReconciliationPaused")
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False", "ReconciliationResumed", T1)
    assert pause_conditions(resumed, False, T1) is None


def _pass(fake: FakeKube, monkeypatch: pytest.MonkeyPatch, annotations: dict) -> dict:
    monkeypatch.setattr(common, "_kube", fake)
    meta = {"name": "c", "namespace": "ns", "uid": "u1", "generation": 3,
            "annotations": annotations}
    body = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster", "metadata": meta}
    asyncio.run(cluster.reconcile(body=body, meta=meta, spec={"replicas": 3}, status={},
                                  name="c", namespace="ns", patch=kopf.Patch(),
                                  logger=_Logger(), memo={}))
    return fake.objects[("Cluster", "c")]["status"]


def test_a_paused_cluster_changes_nothing_and_resumes(monkeypatch, events) -> None:  # noqa: F811
    fake = FakeKube()
    status = _pass(fake, monkeypatch, {PAUSE_ANNOTATION: "true"})
    assert fake.calls == [("get", "Cluster", "c"), ("patch", "Cluster", "c", "status")]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("ReconciliationPaused", "True")]
    assert ("Normal", "ReconciliationPaused") in events
    fake.calls.clear()
    _pass(fake, monkeypatch, {PAUSE_ANNOTATION: "true"})     # still paused: not a write
    assert fake.calls == [("get", "Cluster", "c")]

    fake.calls.clear()
    status = _pass(fake, monkeypatch, {})
    assert ("apply", "StatefulSet", "c-broker") in fake.calls
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["ReconciliationPaused"]["status"] == "False"
    assert conds["Ready"]["reason"] == "BrokersNotReady"
    assert ("Normal", "ReconciliationResumed") in events
