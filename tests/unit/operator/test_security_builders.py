"""A secured Cluster (spec.listeners, spec.authorization) and Users, as the builders and the
User handler's pure parts see them: the rendered broker config must load with rillet's own
definitions, name the certificate files the pods mount, and make the operator and the
brokers super users by the principal their certificates give."""
from __future__ import annotations

import subprocess
from datetime import datetime, timezone

import pytest
from rillet.defs.broker_config import BrokerConfig
from rillet.defs.listeners import security_protocol_map

from rillet_operator import cluster_status, pki
from rillet_operator.builders import broker_config as bc
from rillet_operator.builders import cluster as b
from rillet_operator.builders import names
from rillet_operator.handlers.user import desired_acls, jaas_config
from rillet_operator.spec import SpecError, parse_cluster, parse_user

CID = "MkU3OEVBNTcwNTJENDM2Qg"
LISTENERS = [{"name": "plain", "port": 9092},
             {"name": "scram", "port": 9094, "tls": True,
              "authentication": {"type": "scram-sha-512"}},
             {"name": "mtls", "port": 9095, "tls": True, "authentication": {"type": "tls"}}]


def secured(**over):
    raw = {"replicas": 4, "listeners": LISTENERS,
           "authorization": {"type": "simple", "superUsers": ["admin", "User:CN=ops"]}, **over}
    return parse_cluster("events", "prod", raw)


def _load(s, ordinal: int) -> BrokerConfig:
    shared = bc.shared_settings(s, CID, admin_http=False)
    return BrokerConfig.load(overrides={**shared, **bc.node_settings(s, ordinal, "zone-a")})


def test_secured_config_loads_and_maps_every_listener_to_its_protocol():
    s = secured()
    bc.validate(s, CID)
    for ordinal in (0, 3):     # a voter and a broker-only node
        cfg = _load(s, ordinal)
        assert security_protocol_map(cfg) == {
            "PLAIN": "PLAINTEXT", "SCRAM": "SASL_SSL", "MTLS": "SSL",
            "REPLICATION": "SSL", "CONTROLLER": "SSL"}
        assert cfg.inter_broker_listener.name == "REPLICATION"
        assert cfg.inter_broker_listener.port == names.REPLICATION_PORT
        host = f"events-broker-{ordinal}.events-brokers.prod.svc.cluster.local"
        assert {(l.name, l.host, l.port) for l in cfg.advertised_listeners} == {
            ("PLAIN", host, 9092), ("SCRAM", host, 9094), ("MTLS", host, 9095),
            ("REPLICATION", host, 9091)}
    props = bc.shared_settings(s, CID, admin_http=False)
    assert props["ssl.keystore.location"] == f"{bc.CERTS_MOUNT}/{bc.KEYSTORE_KEY}"
    # Client certificates: required by default (replication, controller, the mtls
    # listener), not asked for on the SCRAM one.
    assert props["ssl.client.auth"] == "required"
    assert props["listener.name.scram.ssl.client.auth"] == "none"
    assert "listener.name.mtls.ssl.client.auth" not in props
    assert props["listener.name.mtls.ssl.truststore.location"] == \
        f"{bc.CERTS_MOUNT}/{bc.CLIENTS_CA_KEY}"
    assert props["listener.name.scram.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["authorizer.class.name"] == bc.AUTHORIZER


def test_super_users_are_the_principals_of_the_operators_certificates():
    s = secured()
    now = datetime.now(timezone.utc)
    ca = pki.new_ca("ca", now, 10)
    certs = [pki.issue_cert(ca, cn, [], now, 5, client=True, server=False,
                            organization=names.CERT_ORGANIZATION)
             for cn in (names.broker_common_name("events"), names.operator_common_name("events"))]
    supers = bc.shared_settings(s, CID, admin_http=False)["super.users"].split(";")
    assert [pki.principal_of(c.cert_pem) for c in certs] == supers[:2]
    assert supers[2:] == ["User:admin", "User:CN=ops"]
    # A User's certificate (the clients CA, CN alone) can never carry those principals.
    user = pki.issue_cert(ca, names.broker_common_name("events"), [], now, 5, client=True,
                          server=False)
    assert pki.principal_of(user.cert_pem) not in supers


def test_plain_cluster_renders_as_before():
    s = parse_cluster("events", "prod", {"replicas": 3})
    props = bc.shared_settings(s, CID, admin_http=False)
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert not any(k.startswith(("ssl.", "authorizer", "super.")) for k in props)
    sts = b.statefulset(s, CID, admin_http=True)
    assert b.CERT_ANNOTATION not in sts["spec"]["template"]["metadata"]["annotations"]
    assert cluster_status.listeners(s)[0]["bootstrapServers"] == names.bootstrap_address(
        "events", "prod")


def test_secured_start_script_matches_node_settings(tmp_path):
    s = secured()
    script = bc.start_script(s).replace(bc.RACK_FILE, str(tmp_path / "rack"))
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "rillet").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    (stub / "rillet").chmod(0o755)
    for ordinal in (0, 3):
        out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                             env={"PATH": f"{stub}:/usr/bin:/bin",
                                  "HOSTNAME": f"events-broker-{ordinal}"}, check=True).stdout
        args = out.splitlines()
        sets = dict(a.split("=", 1) for a in args[4::2])
        assert sets == bc.node_settings(s, ordinal)


def test_statefulset_mounts_the_broker_certificates_and_rolls_on_a_new_one():
    s = secured()
    one = b.statefulset(s, CID, admin_http=True, cert_hash="aaaa")
    two = b.statefulset(s, CID, admin_http=True, cert_hash="bbbb")
    pod = one["spec"]["template"]["spec"]
    assert {"name": "certs", "secret": {"secretName": names.broker_certs("events")}} in \
        pod["volumes"]
    (container,) = pod["containers"]
    assert {"name": "certs", "mountPath": bc.CERTS_MOUNT, "readOnly": True} in \
        container["volumeMounts"]
    assert {p["containerPort"] for p in container["ports"]} >= {9091, 9092, 9093, 9094, 9095}
    assert one["spec"]["template"]["metadata"]["annotations"][b.CERT_ANNOTATION] == "aaaa"
    assert one["spec"]["template"] != two["spec"]["template"]
    ports = {p["port"] for p in b.bootstrap_service(s)["spec"]["ports"]}
    assert ports == {9091, 9092, 9094, 9095}
    assert all(len(p["name"]) <= 15 for p in b.headless_service(s, True)["spec"]["ports"])


def test_status_lists_each_listener_with_its_bootstrap_address():
    got = cluster_status.listeners(secured())
    assert [(l["name"], l["tls"], l["authentication"], l["bootstrapServers"]) for l in got] == [
        ("plain", False, "none", "events-bootstrap.prod.svc.cluster.local:9092"),
        ("scram", True, "scram-sha-512", "events-bootstrap.prod.svc.cluster.local:9094"),
        ("mtls", True, "tls", "events-bootstrap.prod.svc.cluster.local:9095")]


@pytest.mark.parametrize("listeners, words", [
    ([{"name": "replication", "port": 9200}], "operator's own"),
    ([{"name": "admin", "port": 9200}], "operator's own"),
    ([{"name": "plaintext", "port": 9200}], "operator's own"),
    ([{"name": "clients", "port": 9200}], "operator's own"),
    ([{"name": "a", "port": 9091}], "replication listener"),
    ([{"name": "a", "port": 9200}, {"name": "a", "port": 9201}], "taken"),
    ([{"name": "a", "port": 9200}, {"name": "b", "port": 9200}], "taken"),
    ([{"name": "a", "port": 9200, "authentication": {"type": "tls"}}], "needs tls: true"),
    ([{"name": "a", "port": 9200, "authentication": {"type": "kerberos"}}], "must be one of"),
    ([{"name": "Bad_Name", "port": 9200}], "lowercase"),
])
def test_bad_listeners_are_refused_with_a_reason(listeners, words):
    with pytest.raises(SpecError, match=words) as err:
        parse_cluster("c", "ns", {"replicas": 1, "listeners": listeners})
    assert err.value.reason == "InvalidListener"


def test_authorization_without_listeners_and_hand_set_security_are_refused():
    with pytest.raises(SpecError, match="needs spec.listeners"):
        parse_cluster("c", "ns", {"replicas": 1, "authorization": {"type": "simple"}})
    for key in ("authorizer.class.name", "super.users", "ssl.keystore.location"):
        with pytest.raises(bc.InvalidConfig, match="set by the operator"):
            bc.validate(secured(config={key: "x"}), CID)


def test_user_acls_expand_to_one_binding_per_operation_for_its_principal():
    scram = parse_user("alice", "ns", {
        "cluster": "c", "authentication": {"type": "scram-sha-512"},
        "authorization": {"type": "simple", "acls": [
            {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
            {"resource": {"type": "group", "name": "alice-", "patternType": "prefix"},
             "operation": "Read"},
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"], "type": "deny",
             "host": "10.0.0.1"}]}})
    got = {(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
            a.permission) for a in desired_acls(scram)}
    assert got == {("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                   ("TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
                   ("GROUP", "alice-", "PREFIXED", "User:alice", "*", "READ", "ALLOW"),
                   ("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "10.0.0.1",
                    "IDEMPOTENT_WRITE", "DENY")}
    tls = parse_user("bob", "ns", {"cluster": "c", "authentication": {"type": "tls"}})
    assert tls.principal == "User:CN=bob" and desired_acls(tls) == set()


def test_a_tls_users_principal_is_what_the_broker_derives_from_its_certificate():
    now = datetime.now(timezone.utc)
    ca = pki.new_ca("clients", now, 10)
    cert = pki.issue_cert(ca, "bob", [], now, 5, client=True, server=False)
    assert pki.principal_of(cert.cert_pem) == \
        parse_user("bob", "ns", {"cluster": "c", "authentication": {"type": "tls"}}).principal


@pytest.mark.parametrize("raw, words", [
    ({"authentication": {"type": "scram-sha-512"}}, "spec.cluster"),
    ({"cluster": "c", "authentication": {"type": "plain"}}, "authentication.type"),
    ({"cluster": "c", "authentication": {"type": "tls"}, "authorization": {
        "type": "simple", "acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}]}},
     "resource.name"),
    ({"cluster": "c", "authentication": {"type": "tls"}, "authorization": {
        "type": "simple", "acls": [{"resource": {"type": "topic", "name": "t"},
                                    "operations": ["Fly"]}]}}, "unknown operations"),
])
def test_bad_users_are_refused_with_a_reason(raw, words):
    with pytest.raises(SpecError, match=words):
        parse_user("u", "ns", raw)


def test_jaas_line_is_what_kafka_clients_take():
    assert jaas_config("alice", "s3cret") == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="s3cret";')


def test_the_example_manifests_parse_and_render():
    import yaml
    root = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"
    cluster = yaml.safe_load((root / "secure-cluster.yaml").read_text())
    cs = parse_cluster(cluster["metadata"]["name"], "ns", cluster["spec"])
    assert cs.secured and cs.authorization
    bc.validate(cs, CID)
    user = yaml.safe_load((root / "user.yaml").read_text())
    us = parse_user(user["metadata"]["name"], "ns", user["spec"])
    assert us.cluster == cs.name and len(desired_acls(us)) == 4


def test_listeners_cannot_be_added_to_or_removed_from_a_running_cluster():
    plain = parse_cluster("events", "prod", {"replicas": 3})
    rendered_plain = b.config_map(plain, CID, True)["data"]["server.properties"]
    rendered_secured = b.config_map(secured(), CID, True)["data"]["server.properties"]
    assert bc.mode_change(plain, None) is None and bc.mode_change(secured(), None) is None
    assert bc.mode_change(plain, rendered_plain) is None
    assert bc.mode_change(secured(), rendered_secured) is None
    # Another set of user listeners is a rolling restart, not a change of mode.
    other = secured(listeners=[{"name": "tls", "port": 9300, "tls": True}])
    assert bc.mode_change(other, rendered_secured) is None
    assert "cannot be added" in bc.mode_change(secured(), rendered_plain)
    assert "cannot be removed" in bc.mode_change(plain, rendered_secured)
