"""e2e: clients outside Kubernetes, on this machine, reach a Cluster through its external
listeners: a plaintext nodeport listener and a SCRAM-SHA-512 over TLS nodeport listener, with
kafka-python and confluent-kafka (librdkafka), each producing and reading back its records
(and Kafka's console tools, i.e. the Java client, when their jars are cached) through the
addresses the brokers advertise (node address + each broker's nodePort; the TLS
client checks the broker certificate against the node address it dialled).

A loadbalancer listener: this cluster has no load balancer controller, so its Services get no
address and status says the listener is pending while the brokers advertise their in-cluster
names there. The test then assigns addresses as a cloud's controller would (the Services'
status.loadBalancer.ingress, set through the API), each one a node's address: kube-proxy on
that node forwards the listener's port for that address, so a client here reaches it. The
operator rolls the brokers onto their new addresses and a client reads and writes through them.

Needs a cluster whose node addresses this machine reaches (kind here: 198.19.255.0/24)."""
from __future__ import annotations

import base64
import sys
import time
import uuid
from typing import Iterator

import pytest

from localk8s.kube import Kube
from localk8s.testing import restricted_namespace
from test_operator import _debug, condition, delete_namespace, get_cr, operator  # noqa: F401
from test_security import _apply, _wait_ready

REPO = str(__import__("pathlib").Path(__file__).resolve().parents[1])

pytestmark = pytest.mark.timeout(1800)

CLUSTER = "outside"
PLAIN_PORT, SCRAM_PORT, LB_PORT = 9094, 9095, 9096
TOPIC = "events"
N = 200


def _nodes_reachable(kube: Kube) -> list[str]:
    return [a["address"] for n in kube.list("Node") for a in n["status"]["addresses"]
            if a["type"] == "InternalIP"]


@pytest.fixture(scope="module")
def outside(k8s, operator) -> Iterator[str]:  # noqa: F811
    kube = k8s.kube
    if not all(a.startswith("198.19.255.") for a in _nodes_reachable(kube)):
        pytest.skip("the nodes' addresses are not on this machine's kind network")
    ns = f"e2e-ext-{uuid.uuid4().hex[:5]}"
    kube.create(restricted_namespace(ns))
    try:
        _apply(kube, ns, "clusters", "Cluster", CLUSTER, {
            "replicas": 3, "config": {"min.insync.replicas": 2},
            "storage": {"type": "ephemeral"},
            "listeners": [
                {"name": "plain", "port": PLAIN_PORT, "type": "nodeport"},
                {"name": "scram", "port": SCRAM_PORT, "type": "nodeport", "tls": True,
                 "authentication": {"type": "scram-sha-512"}},
                {"name": "lb", "port": LB_PORT, "type": "loadbalancer"}]})
        # Ready while the load balancer listener waits for addresses (Reconciling says so).
        _wait_ready(k8s, ns, f"cluster.rillet.io/{CLUSTER}", 600)
        _apply(kube, ns, "topics", "Topic", TOPIC, {"cluster": CLUSTER, "partitions": 3,
                                                    "replicas": 3})
        _apply(kube, ns, "users", "User", "alice", {
            "cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}})
        for resource in (f"topic.rillet.io/{TOPIC}", "user.rillet.io/alice"):
            _wait_ready(k8s, ns, resource)
        yield ns
    finally:
        delete_namespace(kube, ns)


def _status(kube: Kube, ns: str) -> dict:
    return (get_cr(kube, ns, "clusters", CLUSTER) or {}).get("status") or {}


def _listener(kube: Kube, ns: str, name: str) -> dict:
    return next(l for l in _status(kube, ns).get("listeners") or () if l["name"] == name)


def _secret(kube: Kube, ns: str, name: str, key: str) -> str:
    return base64.b64decode(kube.get("Secret", name, ns)["data"][key]).decode()


def _roundtrip_kafka_python(bootstrap: str, topic_suffix: str, **security) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    values = [f"kp-{topic_suffix}-{i}".encode() for i in range(N)]
    futures = [producer.send(TOPIC, v) for v in values]
    producer.flush(timeout=120)
    metas = [f.get(timeout=60) for f in futures]
    producer.close(timeout=30)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             **security)
    parts = sorted({m.partition for m in metas})
    tps = [TopicPartition(TOPIC, p) for p in parts]
    consumer.assign(tps)
    # From where this run's records start on each partition.
    start = {tp: min(m.offset for m in metas if m.partition == tp.partition) for tp in tps}
    for tp, off in start.items():
        consumer.seek(tp, off)
    got: set[bytes] = set()
    deadline = time.monotonic() + 120
    while not set(values) <= got and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=2000).values():
            got |= {r.value for r in records}
    consumer.close()
    assert set(values) <= got, f"{len(set(values) - got)} of {N} records not read back"


def _roundtrip_confluent(bootstrap: str, suffix: str, **config) -> dict[int, tuple[str, int]]:
    """Produces N records with librdkafka (acks=all, idempotent), reads them back with a
    group; returns the brokers as Metadata advertised them (id -> (host, port))."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient
    brokers = {b.id: (b.host, b.port) for b in AdminClient(
        {"bootstrap.servers": bootstrap, **config}).list_topics(timeout=60).brokers.values()}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, **config})
    errors: list = []
    values = [f"ck-{suffix}-{i}" for i in range(N)]
    for v in values:
        producer.produce(TOPIC, v.encode(), on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(120) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", **config})
    consumer.subscribe([TOPIC])
    got: set[str] = set()
    deadline = time.monotonic() + 180
    try:
        while not set(values) <= got and time.monotonic() < deadline:
            msg = consumer.poll(2.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.add(msg.value().decode())
    finally:
        consumer.close()
    assert set(values) <= got, f"{len(set(values) - got)} of {N} records not read back"
    return brokers


def _node_ports(kube: Kube, ns: str, listener: str) -> dict[int, int]:
    return {i: kube.get("Service", f"{CLUSTER}-{listener}-{i}", ns)["spec"]["ports"][0][
        "nodePort"] for i in range(3)}


def test_plaintext_nodeport_from_outside_with_kafka_python_and_librdkafka(k8s, outside):
    kube, ns = k8s.kube, outside
    entry = _listener(kube, ns, "plain")
    assert entry["type"] == "nodeport"
    bootstrap = entry["bootstrapServers"]
    nodes = set(_nodes_reachable(kube))
    assert {a.rsplit(":", 1)[0] for a in bootstrap.split(",")} <= nodes
    _roundtrip_kafka_python(bootstrap, "plain")
    brokers = _roundtrip_confluent(bootstrap, "plain")
    # Each broker advertises its node's address and its own Service's nodePort.
    ports = _node_ports(kube, ns, "plain")
    pods = {int(p["metadata"]["name"].rsplit("-", 1)[1]): p["status"]["hostIP"]
            for p in kube.list("Pod", ns) if p["metadata"]["name"].startswith(f"{CLUSTER}-broker")}
    assert brokers == {i: (pods[i], ports[i]) for i in range(3)}


def test_kafka_console_tools_through_the_nodeport_listener(k8s, outside):
    """The Java client (Kafka's console producer and consumer, from the Maven Central jars the
    integration tests fetch) through the plaintext nodeport listener."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from tests.integration.java_tools import KafkaTools, fetch_kafka_jars, parse_consumed
    fetch_kafka_jars()   # a no-op when cached
    tools = KafkaTools(_listener(k8s.kube, outside, "plain")["bootstrapServers"])
    topic = f"console-{uuid.uuid4().hex[:6]}"
    tools.topics("--create", "--topic", topic, "--partitions", "3", "--replication-factor",
                 "3").ok()
    lines = [f"k{i}:java-{i}" for i in range(30)]
    tools.produce_lines(topic, lines, "--producer-property", "acks=all").ok()
    got = parse_consumed(tools.consume(topic, len(lines), "--from-beginning").ok())
    assert sorted(f"{r.key}:{r.value}" for r in got) == sorted(lines)


def test_scram_over_tls_nodeport_from_outside_with_kafka_python_and_librdkafka(k8s, outside,
                                                                             tmp_path):
    kube, ns = k8s.kube, outside
    bootstrap = _listener(kube, ns, "scram")["bootstrapServers"]
    ca = tmp_path / "ca.crt"
    ca.write_text(_secret(kube, ns, f"{CLUSTER}-cluster-ca-cert", "ca.crt"))
    password = _secret(kube, ns, "alice", "password")
    # Both clients check the broker certificate against the node address they dial.
    _roundtrip_kafka_python(bootstrap, "scram", security_protocol="SASL_SSL",
                            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                            sasl_plain_password=password, ssl_cafile=str(ca),
                            ssl_check_hostname=True)
    brokers = _roundtrip_confluent(bootstrap, "scram", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": password, "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https"})
    assert {h for h, _ in brokers.values()} <= set(_nodes_reachable(kube))
    # A wrong password is refused on the outside listener too.
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                     "sasl.password": "wrong", "ssl.ca.location": str(ca)}
                    ).list_topics(timeout=15)


def _restarted_advertising(kube: Kube, ns: str, ordinal: int, advertised: str) -> bool:
    """Whether broker `ordinal` runs, ready, from a pod whose start command advertises that."""
    pod = kube.get_or_none("Pod", f"{CLUSTER}-broker-{ordinal}", ns) or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True"
                for c in (pod.get("status") or {}).get("conditions") or ())
    script = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("command") or []
    return ready and not pod["metadata"].get("deletionTimestamp") and \
        f"{ordinal}) advertised=" in "".join(script) and any(
            line.strip().startswith(f"{ordinal})") and advertised in line
            for line in "".join(script).splitlines())


def test_loadbalancer_listener_is_pending_until_addresses_are_assigned(k8s, outside):
    kube, ns = k8s.kube, outside
    entry = _listener(kube, ns, "lb")
    assert entry["type"] == "loadbalancer" and "bootstrapServers" not in entry, entry
    assert "no load balancer address" in entry["pending"]
    reconciling = condition(get_cr(kube, ns, "clusters", CLUSTER), "Reconciling")
    assert reconciling.get("reason") == "ListenerAddressPending", reconciling
    # Act as the cloud's load balancer controller: each Service gets a node's address.
    nodes = sorted(_nodes_reachable(kube))
    services = [f"{CLUSTER}-lb-bootstrap"] + [f"{CLUSTER}-lb-{i}" for i in range(3)]
    for service, address in zip(services, nodes):
        kube.request("PATCH", f"/api/v1/namespaces/{ns}/services/{service}/status",
                     {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}},
                     content_type="application/merge-patch+json")
    want = f"{nodes[0]}:{LB_PORT}"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if _listener(kube, ns, "lb").get("bootstrapServers") == want and all(
                _restarted_advertising(kube, ns, i, f"LB://{nodes[i + 1]}:{LB_PORT}")
                for i in range(3)):
            break
        time.sleep(3)
    else:
        pytest.fail(f"lb listener not rolled onto its addresses: {_debug(kube, ns)}")
    brokers = _roundtrip_confluent(want, "lb")
    assert brokers == {i: (nodes[i + 1], LB_PORT) for i in range(3)}
