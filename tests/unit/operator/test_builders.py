"""The objects a Cluster becomes, built from a spec without a cluster."""
from __future__ import annotations

import subprocess

from rillet.defs.broker_config import BrokerConfig

from rillet_operator.builders import broker_config as bc
from rillet_operator.builders import cluster as b
from rillet_operator.builders import names
from rillet_operator.spec import parse_cluster

CID = "MkU3OEVBNTcwNTJENDM2Qg"


def spec(**over):
    raw = {"replicas": 3, "image": "rillet/broker:dev",
           "rack": {"topologyKey": "topology.kubernetes.io/zone"},
           "storage": {"type": "persistent-claim", "size": "1Gi", "class": "fast"},
           "config": {"min.insync.replicas": 2, "auto.create.topics.enable": False},
           "template": {"pod": {"labels": {"team": "data"}, "annotations": {"a": "b"},
                                "tolerations": [{"key": "k", "operator": "Exists"}],
                                "priorityClassName": "high"}},
           "pdb": {"maxUnavailable": 1}, **over}
    return parse_cluster("events", "prod", raw)


def test_statefulset_identity_storage_rack_and_policies():
    sts = b.statefulset(spec(), CID, admin_http=True)
    s = sts["spec"]
    assert sts["metadata"]["name"] == "events-broker" and s["replicas"] == 3
    assert s["podManagementPolicy"] == "Parallel"
    assert s["updateStrategy"] == {"type": "OnDelete"}
    assert s["serviceName"] == "events-brokers"
    claim = s["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    pod = s["template"]["spec"]
    assert pod["serviceAccountName"] == "events-broker"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == s["selector"]["matchLabels"]
    init = pod["initContainers"][0]
    env = {e["name"]: e for e in init["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["RACK_TOPOLOGY_KEY"]["value"] == "topology.kubernetes.io/zone"
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert pod["priorityClassName"] == "high"
    meta = s["template"]["metadata"]
    assert meta["labels"]["team"] == "data" and meta["annotations"]["a"] == "b"
    assert "rillet.io/config-hash" in meta["annotations"]
    broker = pod["containers"][0]
    assert broker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080}
    assert broker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}
    assert {v["name"] for v in pod["volumes"]} == {"config", "rack", "tmp"}  # data: a claim


def test_ephemeral_storage_and_no_rack():
    sts = b.statefulset(spec(storage={"type": "ephemeral"}, rack=None), CID, admin_http=False)
    pod = sts["spec"]["template"]["spec"]
    assert "volumeClaimTemplates" not in sts["spec"]
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]
    assert "initContainers" not in pod and "topologySpreadConstraints" not in pod
    # Without the broker's admin port, readiness falls back to the client listener.
    assert pod["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": 9092}


def test_services():
    headless = b.headless_service(spec(), admin_http=True)
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert {p["port"] for p in headless["spec"]["ports"]} == {9092, 9093, 8080}
    boot = b.bootstrap_service(spec())
    assert boot["metadata"]["name"] == "events-bootstrap"
    assert all(p["port"] == p["targetPort"] for p in boot["spec"]["ports"])
    assert names.bootstrap_address("events", "prod") == \
        "events-bootstrap.prod.svc.cluster.local:9092"


def test_configmap_voters_cluster_id_and_user_config():
    props = b.config_map(spec(replicas=5), CID, admin_http=True)["data"]["server.properties"]
    lines = dict(line.split("=", 1) for line in props.splitlines() if "=" in line)
    assert lines["cluster.id"] == CID
    assert lines["controller.quorum.voters"] == ",".join(
        f"{i}@events-broker-{i}.events-brokers.prod.svc.cluster.local:9093" for i in range(3))
    assert lines["min.insync.replicas"] == "2"
    assert lines["auto.create.topics.enable"] == "false"
    assert lines["admin.http.listener"] == "0.0.0.0:8080"
    one = b.config_map(spec(replicas=1), CID, admin_http=False)["data"]["server.properties"]
    assert "controller.quorum.voters=0@events-broker-0." in one
    assert "offsets.topic.replication.factor=1" in one
    assert "admin.http.listener" not in one


def test_every_node_config_loads_with_rillets_own_definitions():
    s = spec(replicas=4)
    shared = bc.shared_settings(s, CID, admin_http=False)
    for ordinal in range(4):
        cfg = BrokerConfig.load(overrides={**shared, **bc.node_settings(s, ordinal, "zone-a")})
        assert cfg.node_id == ordinal
        assert (ordinal in cfg.quorum_voters) == (ordinal < 3)
        assert cfg.advertised_listener.host == \
            f"events-broker-{ordinal}.events-brokers.prod.svc.cluster.local"


def test_start_script_matches_node_settings(tmp_path):
    """Run the start command with a stub `rillet` and compare what it passes with
    node_settings (voter and broker-only ordinals, with and without a rack file)."""
    s = spec(replicas=4)
    script = bc.start_script(s).replace(bc.RACK_FILE, str(tmp_path / "rack"))
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "rillet").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    (stub / "rillet").chmod(0o755)
    for ordinal, rack in ((0, "zone-a"), (3, None)):
        if rack:
            (tmp_path / "rack").write_text(rack)
        elif (tmp_path / "rack").exists():
            (tmp_path / "rack").unlink()
        out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                             env={"PATH": f"{stub}:/usr/bin:/bin",
                                  "HOSTNAME": f"events-broker-{ordinal}"}, check=True).stdout
        args = out.splitlines()
        assert args[:3] == ["serve", "--config", bc.CONFIG_FILE]
        assert set(args[3::2]) == {"--set"}
        sets = dict(a.split("=", 1) for a in args[4::2])
        assert sets == bc.node_settings(s, ordinal, rack)


def test_pdb_service_account_and_rack_binding():
    assert b.pdb(spec())["spec"]["maxUnavailable"] == 1
    assert b.pdb(spec())["spec"]["selector"]["matchLabels"] == names.selector_labels("events")
    crb = b.rack_binding(spec())
    assert crb["metadata"]["name"] == "rillet-prod-events-broker-rack"
    assert crb["roleRef"]["name"] == names.NODE_READER_ROLE
    # Another release's operator binds its brokers to its own release's role.
    assert b.rack_binding(spec(), "other-broker-node-reader")["roleRef"]["name"] == \
        "other-broker-node-reader"
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "events-broker",
                                "namespace": "prod"}]
    kinds = [o["kind"] for o in b.owned_objects(spec(), CID, True)]
    assert kinds == ["ServiceAccount", "ConfigMap", "Service", "Service", "StatefulSet",
                     "PodDisruptionBudget"]
