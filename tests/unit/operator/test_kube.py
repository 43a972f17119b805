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
