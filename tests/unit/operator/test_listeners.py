"""External listeners (nodeport, loadbalancer): the Services, what each broker advertises,
what the broker certificate covers and what status tells a client outside. Pure."""
from __future__ import annotations

import subprocess

import pytest
from rillet.defs.broker_config import BrokerConfig

from rillet_operator import pki
from rillet_operator.builders import broker_config as bc
from rillet_operator.builders import cluster as b
from rillet_operator.builders import listeners as ls
from rillet_operator.builders import names
from rillet_operator.spec import SpecError, parse_cluster

from .test_pki import NOW, client_context, handshake, server_context

CID = "MkU3OEVBNTcwNTJENDM2Qg"
LISTENERS = [{"name": "plain", "port": 9092},
             {"name": "ext", "port": 9094, "type": "nodeport",
              "configuration": {"bootstrap": {"nodePort": 31000},
                                "brokers": [{"broker": 1, "advertisedHost": "kafka-1.example",
                                             "advertisedPort": 443, "nodePort": 31001}]}},
             {"name": "lb", "port": 9095, "type": "loadbalancer", "tls": True,
              "authentication": {"type": "scram-sha-512"}}]


def spec(replicas: int = 3, listeners=LISTENERS):
    return parse_cluster("events", "prod", {"replicas": replicas, "listeners": listeners})


def svc(node_port: int | None = None, lb: str | None = None) -> dict:
    out: dict = {"spec": {"ports": [{"port": 9094, **({"nodePort": node_port}
                                                       if node_port else {})}]}}
    if lb:
        out["status"] = {"loadBalancer": {"ingress": [{"ip": lb}]}}
    return out


def observed(assign_lb: bool) -> dict[str, dict]:
    out = {names.external_bootstrap_service("events", "ext"): svc(31000)}
    out |= {names.external_broker_service("events", "ext", i): svc(31000 + i + 10)
            for i in range(3)}
    out[names.external_bootstrap_service("events", "lb")] = svc(lb="203.0.113.9" if assign_lb
                                                                 else None)
    out |= {names.external_broker_service("events", "lb", i):
            svc(lb=f"203.0.113.{i + 1}" if assign_lb else None) for i in range(3)}
    return out


def test_parse_types_and_per_broker_overrides():
    s = spec()
    plain, ext, lb = s.listeners
    assert (plain.type, plain.external, ext.type, lb.type) == \
        ("internal", False, "nodeport", "loadbalancer")
    assert ext.bootstrap_node_port == 31000
    assert ext.override(1).advertised_host == "kafka-1.example"
    assert ext.override(0).advertised_host is None


@pytest.mark.parametrize("listener, words", [
    ({"type": "ingress"}, "type must be one of"),
    ({"type": "loadbalancer", "configuration": {"bootstrap": {"nodePort": 31000}}},
     "nodePort is for type nodeport only"),
    ({"type": "nodeport", "configuration": {"bootstrap": {"nodePort": 80}}}, "30000-32767"),
    ({"type": "nodeport", "configuration": {"brokers": [{"broker": 0}, {"broker": 0}]}},
     "names a broker twice"),
    ({"type": "nodeport", "configuration": {"brokers": [{"broker": 0,
                                                         "advertisedHost": "a;rm -rf"}]}},
     "advertisedHost"),
])
def test_bad_external_listeners_are_refused(listener, words):
    with pytest.raises(SpecError, match=words) as err:
        spec(listeners=[{"name": "ext", "port": 9094, **listener}])
    assert err.value.reason == "InvalidListener"


def test_a_service_per_broker_and_a_bootstrap_per_external_listener():
    made = {o["metadata"]["name"]: o for o in ls.services(spec())}
    assert set(made) == {"events-ext-bootstrap", "events-ext-0", "events-ext-1", "events-ext-2",
                         "events-lb-bootstrap", "events-lb-0", "events-lb-1", "events-lb-2"}
    one = made["events-ext-1"]["spec"]
    assert one["type"] == "NodePort"
    assert one["selector"]["statefulset.kubernetes.io/pod-name"] == "events-broker-1"
    assert one["ports"] == [{"name": "ext", "port": 9094, "targetPort": 9094,
                             "protocol": "TCP", "nodePort": 31001}]
    assert "nodePort" not in made["events-ext-0"]["spec"]["ports"][0]
    assert made["events-ext-bootstrap"]["spec"]["ports"][0]["nodePort"] == 31000
    assert made["events-lb-2"]["spec"]["type"] == "LoadBalancer"
    assert "statefulset.kubernetes.io/pod-name" not in \
        made["events-lb-bootstrap"]["spec"]["selector"]
    assert all(o["metadata"]["labels"][ls.LABEL_LISTENER] in ("ext", "lb")
               for o in made.values())


def test_advertised_nodeport_is_the_node_address_and_nodeport_lb_waits_for_its_address():
    s = spec()
    table = ls.advertised_table(s, observed(assign_lb=False))
    assert table[("ext", 0)] == ls.Advertised(None, 31010)
    assert table[("ext", 1)] == ls.Advertised("kafka-1.example", 443)   # the override
    assert table[("lb", 0)] is None
    assert ls.pending_brokers(table) == ["lb/0", "lb/1", "lb/2"]
    table = ls.advertised_table(s, observed(assign_lb=True))
    assert table[("lb", 2)] == ls.Advertised("203.0.113.3", 9095)
    assert ls.pending_brokers(table) == []


@pytest.mark.parametrize("assign_lb", [False, True])
def test_start_script_advertises_what_node_settings_say_and_the_config_loads(tmp_path,
                                                                             assign_lb):
    """The start command with a stub `rillet`, the pod's node address in $HOST_IP: what it
    passes is node_settings, and the whole config loads with rillet's own definitions."""
    s = spec()
    table = ls.advertised_table(s, observed(assign_lb))
    script = bc.start_script(s, table).replace(bc.RACK_FILE, str(tmp_path / "rack"))
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "rillet").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    (stub / "rillet").chmod(0o755)
    for ordinal in range(3):
        out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                             env={"PATH": f"{stub}:/usr/bin:/bin", "HOST_IP": "198.19.255.11",
                                  "HOSTNAME": f"events-broker-{ordinal}"}, check=True).stdout
        sets = dict(a.split("=", 1) for a in out.splitlines()[4::2])
        want = bc.node_settings(s, ordinal, external=table, host_ip="198.19.255.11")
        assert sets == want
        cfg = BrokerConfig.load(overrides={**bc.shared_settings(s, CID, False), **sets})
        by_name = {l.name: (l.host, l.port) for l in cfg.advertised_listeners}
        assert by_name["EXT"] == (("kafka-1.example", 443) if ordinal == 1
                                  else ("198.19.255.11", 31010 + ordinal))
        assert by_name["PLAIN"][0] == names.pod_fqdn("events", "prod", ordinal)
        lb_host = f"203.0.113.{ordinal + 1}" if assign_lb else \
            names.pod_fqdn("events", "prod", ordinal)
        assert by_name["LB"] == (lb_host, 9095)


def test_statefulset_reads_the_node_address_and_rolls_when_an_address_changes():
    s = spec()
    before = b.statefulset(s, CID, True, "", ls.advertised_table(s, observed(False)))
    after = b.statefulset(s, CID, True, "", ls.advertised_table(s, observed(True)))
    (container,) = before["spec"]["template"]["spec"]["containers"]
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in \
        container["env"]
    assert before["spec"]["template"] != after["spec"]["template"]
    internal_only = spec(listeners=LISTENERS[:1])
    (container,) = b.statefulset(internal_only, CID, True)["spec"]["template"]["spec"][
        "containers"]
    assert "env" not in container


def test_status_gives_the_outside_bootstrap_or_says_it_is_pending():
    s = spec()
    got = ls.status(s, observed(False), ["198.19.255.11", "198.19.255.12"])
    assert got["ext"] == {"type": "nodeport",
                          "bootstrapServers": "198.19.255.11:31000,198.19.255.12:31000"}
    assert got["lb"]["type"] == "loadbalancer"
    assert "bootstrapServers" not in got["lb"]
    assert "events-lb-bootstrap has no load balancer address" in got["lb"]["pending"]
    assert ls.status(s, observed(True), [])["lb"]["bootstrapServers"] == "203.0.113.9:9095"


def test_tls_certificate_covers_node_and_load_balancer_addresses(tmp_path):
    tls_nodeport = [{"name": "ext", "port": 9094, "type": "nodeport", "tls": True,
                     "configuration": {"brokers": [{"broker": 0,
                                                    "advertisedHost": "k0.example"}]}},
                    LISTENERS[2]]
    s = spec(listeners=tls_nodeport)
    extra = ls.certificate_names(s, observed(True), ["198.19.255.11", "198.19.255.12"])
    assert extra == sorted({"k0.example", "198.19.255.11", "198.19.255.12", "203.0.113.1",
                            "203.0.113.2", "203.0.113.3", "203.0.113.9"})
    # A plaintext external listener needs nothing in the certificate.
    assert ls.certificate_names(spec(), observed(True), ["198.19.255.11"]) == \
        ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.9"]
    ca = pki.new_ca("events cluster CA", NOW, 365)
    sans = pki.broker_sans("events", "prod", 3) + extra
    cert = pki.issue_cert(ca, "events-broker", sans, NOW, 90, client=True, server=True)
    assert pki.covers(cert.cert_pem, sans)
    assert not pki.covers(cert.cert_pem, ["198.19.255.13"])   # a new node: reissued
    # A client dialling a node address checks it against an IP SAN.
    handshake(server_context(cert, tmp_path), client_context(ca.cert_pem, tmp_path),
              "198.19.255.12")


def test_without_external_listeners_the_start_command_is_the_one_before_them() -> None:
    """An operator upgrade must not change the pod template of a Cluster that has no external
    listener: a changed command is a new StatefulSet revision, which rolls every broker."""
    cs = parse_cluster("events", "ns", {"replicas": 3})
    script = bc.start_script(cs)
    assert 'case "$ordinal"' not in script and 'advertised="' not in script
    domain = f"{names.headless_service('events')}.ns.svc.{names.CLUSTER_DOMAIN}"
    assert f'--set "advertised.listeners=PLAINTEXT://$HOSTNAME.{domain}:' in script
