"""Drift detection of the API wrapper: what the builder states must hold; server-added fields
(defaults, clusterIP, status) are not drift."""
from __future__ import annotations

from rillet_operator.kube import desired_patch, drifted


def test_server_added_fields_are_not_drift():
    desired = {"spec": {"clusterIP": "None", "ports": [{"name": "clients", "port": 9092}]}}
    current = {"spec": {"clusterIP": "None", "clusterIPs": ["None"], "type": "ClusterIP",
                        "ports": [{"name": "clients", "port": 9092, "protocol": "TCP"}]},
               "status": {"loadBalancer": {}}}
    assert not drifted(desired, current)


def test_edits_and_removals_are_drift():
    desired = {"spec": {"publishNotReadyAddresses": True, "ports": [{"port": 9092}]}}
    assert drifted(desired, {"spec": {"publishNotReadyAddresses": False, "ports": [{"port": 9092}]}})
    assert drifted(desired, {"spec": {"ports": [{"port": 9092}]}})
    assert drifted(desired, {"spec": {"publishNotReadyAddresses": True,
                                      "ports": [{"port": 9092}, {"port": 1}]}})


def test_patch_leaves_out_type_and_status():
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {},
           "status": {}}
    assert desired_patch(obj) == {"metadata": {"name": "x"}, "spec": {}}


def _sts(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "c-broker", "namespace": "ns"}, "spec": {"replicas": replicas}}


def test_a_change_the_operator_wants_is_an_update_not_a_correction():
    """Issue 32: a user's own scale read "Corrected StatefulSet ..." as if it were drift."""
    from rillet_operator.kube import change_kind, drifted_paths, with_desired_hash
    applied = with_desired_hash(_sts(3))                 # what the API holds after apply
    scaled = with_desired_hash(_sts(5))                  # the spec asks for more brokers
    assert drifted(scaled, applied) and change_kind(scaled, applied) == "updated"
    assert drifted_paths(scaled, applied) == ["metadata.annotations.rillet.io/desired-hash",
                                              "spec.replicas"]
    edited = {**applied, "spec": {"replicas": 1}}      # someone scaled it by hand
    again = with_desired_hash(_sts(3))
    assert change_kind(again, edited) == "corrected"
    assert drifted_paths(again, edited) == ["spec.replicas"]
    # Objects from before the hash existed: the first apply is an update, not drift.
    assert change_kind(again, _sts(3)) == "updated"


def test_the_hash_ignores_itself_and_follows_the_content():
    from rillet_operator.kube import desired_hash, with_desired_hash
    assert desired_hash(with_desired_hash(_sts(3))) == desired_hash(_sts(3))
    assert desired_hash(_sts(3)) != desired_hash(_sts(4))
