"""Issue 32: Ready tells whether the cluster serves; the change under way sits beside it
(Reconciling, Scaling, RollingRestart); refusals are Ready False with Error; config warnings
are a condition of their own."""
from __future__ import annotations

from rillet_operator import cluster_status, conditions
from rillet_operator.conditions import CLUSTER_TRACKED, Outcome, Step
from rillet_operator.spec import parse_cluster


def _brokers(states: list[str]) -> list[dict]:
    return [{"id": i, "pod": f"c-broker-{i}", "state": s} for i, s in enumerate(states)]


def _spec(replicas: int, **extra) -> object:
    return parse_cluster("c", "ns", {"replicas": replicas, **extra})


def test_one_broker_restarting_of_three_still_serves():
    out = cluster_status.serving(_spec(3), _brokers(["Ready", "Starting", "Ready"]))
    assert out.ready and out.reason == "BrokersStarting" and out.reconciling
    assert "2/3 brokers ready (c-broker-1 Starting)" in out.message


def test_two_down_of_three_or_the_only_broker_down_does_not_serve():
    assert not cluster_status.serving(_spec(3), _brokers(["Ready", "Starting", "Missing"])).ready
    assert not cluster_status.serving(_spec(1), _brokers(["Starting"])).ready
    # A PDB that lets no broker go: one down is already more than the cluster allows.
    strict = _spec(3, pdb={"maxUnavailable": 0})
    assert not cluster_status.serving(strict, _brokers(["Ready", "Starting", "Ready"])).ready


def test_brokers_a_scale_up_adds_do_not_count_against_serving():
    states = _brokers(["Ready", "Ready", "Ready", "Pending", "Starting"])
    assert cluster_status.serving(_spec(5), states, frozenset({3, 4})).ready
    assert not cluster_status.serving(_spec(5), states).ready


def test_a_scale_up_keeps_ready_true_with_the_change_as_reason():
    serves = cluster_status.serving(_spec(5), _brokers(["Ready"] * 3 + ["Starting"] * 2),
                                    frozenset({3, 4}))
    scaling = Outcome(False, "ScalingUp", "waiting for brokers [3, 4] to register",
                      reconciling=True)
    out = cluster_status.combine(serves, None, scaling)
    assert out.ready and out.reason == "ScalingUp" and not out.error
    conds = conditions.apply_outcome([], out, "T1", 2, CLUSTER_TRACKED)
    by_type = {c["type"]: c for c in conds}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["Scaling"]["status"] == "True" and by_type["Scaling"]["reason"] == "ScalingUp"
    assert by_type["Reconciling"]["status"] == "True"
    assert by_type["RollingRestart"]["status"] == "False"
    assert [c["type"] for c in conds] == ["Ready", "Reconciling", "Scaling", "RollingRestart",
                                          "StorageResize", "Error", "ConfigWarning"]


def test_a_rolling_restart_keeps_ready_true():
    serves = cluster_status.serving(_spec(3), _brokers(["Ready", "Terminating", "Ready"]))
    rolling = Outcome(False, "RollingRestart", "waiting for pod c-broker-1 to come back ready",
                      reconciling=True)
    out = cluster_status.combine(serves, rolling, None)
    assert out.ready and out.reason == "RollingRestart"
    conds = {c["type"]: c for c in conditions.apply_outcome([], out, "T", 1, CLUSTER_TRACKED)}
    assert conds["RollingRestart"]["status"] == "True" and conds["Scaling"]["status"] == "False"


def test_a_refused_scale_down_is_ready_false_with_error_and_its_reason():
    serves = cluster_status.serving(_spec(2), _brokers(["Ready"] * 3))
    refused = Outcome(False, "ScaleDownUnsafe", "topic t has replication factor 3", error=True)
    out = cluster_status.combine(serves, None, refused)
    assert not out.ready and out.error and out.reason == "ScaleDownUnsafe"
    conds = {c["type"]: c for c in conditions.apply_outcome([], out, "T", 1, CLUSTER_TRACKED)}
    assert conds["Error"]["status"] == "True" and conds["Error"]["reason"] == "ScaleDownUnsafe"


def test_not_serving_wins_over_a_running_change():
    serves = cluster_status.serving(_spec(3), _brokers(["Ready", "Missing", "Missing"]))
    rolling = Outcome(False, "RollingRestart", "x", reconciling=True)
    out = cluster_status.combine(serves, rolling, None)
    assert not out.ready and out.reason == "BrokersNotReady" and not out.error
    assert out.rolling == Step("RollingRestart", "x")


def test_config_warnings_are_a_condition_and_ready_stays_true():
    serves = cluster_status.serving(_spec(1), _brokers(["Ready"]))
    out = cluster_status.combine(serves, None, None, ["min.insync.replicas 5 exceeds ..."])
    assert out.ready and out.reason == "Ready"
    conds = {c["type"]: c for c in conditions.apply_outcome([], out, "T", 1, CLUSTER_TRACKED)}
    assert conds["ConfigWarning"]["status"] == "True"
    assert "min.insync.replicas 5" in conds["ConfigWarning"]["message"]
    calm = conditions.apply_outcome(list(conds.values()), cluster_status.combine(
        serves, None, None), "T2", 2, CLUSTER_TRACKED)
    assert conditions.get(calm, "ConfigWarning")["status"] == "False"


def test_a_topic_carries_no_cluster_conditions():
    conds = conditions.apply_outcome([], Outcome(True, "Ready", "6 partitions"), "T", 1)
    assert [c["type"] for c in conds] == ["Ready", "Reconciling", "Error"]


def test_brokers_the_operator_cannot_reach_leave_ready_alone_and_reconciling_says_why():
    serves = cluster_status.serving(_spec(3), _brokers(["Ready"] * 3))
    out = cluster_status.combine(serves, None, None, pending=Step(
        "ClusterNotReachable", "the operator cannot reach the brokers"))
    assert out.ready and out.reason == "Ready"
    conds = {c["type"]: c for c in conditions.apply_outcome([], out, "T", 1, CLUSTER_TRACKED)}
    assert conds["Reconciling"]["status"] == "True"
    assert conds["Reconciling"]["reason"] == "ClusterNotReachable"


def test_a_new_cluster_is_ready_only_with_every_broker():
    """`kubectl wait --for=condition=Ready` after creating a Cluster means all its brokers:
    the tolerance is for a cluster that was Ready already."""
    states = _brokers(["Ready", "Starting", "Ready"])
    out = cluster_status.serving(_spec(3), states, established=False)
    assert not out.ready and out.reason == "BrokersNotReady"
    assert cluster_status.serving(_spec(3), _brokers(["Ready"] * 3), established=False).ready
