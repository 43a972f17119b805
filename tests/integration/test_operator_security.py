"""The operator's security path against a real broker process, without Kubernetes: the broker
runs the properties the operator renders for a secured Cluster (builders/broker_config.py)
with certificates from the operator's pki; the operator's own connection (handlers/access.py:
mTLS on the replication listener with its certificate) sets a User's SCRAM credential and
ACLs through rillet.client.security; real clients then authenticate and are held to them.
The e2e suite (e2e/test_security.py) runs the same through the API server and pods."""
from __future__ import annotations

import asyncio
import datetime
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from rillet.client import quotas, security

from rillet_operator import pki
from rillet_operator.builders import broker_config as bc
from rillet_operator.builders import names
from rillet_operator.handlers.access import Target, client_context
from rillet_operator.handlers.user import desired_acls
from rillet_operator.spec import ClusterSpec, parse_cluster, parse_user
from rillet_operator.user_quotas import quota_changes, user_entity
from tests.harness import BrokerProcess, free_ports, listening
from tests.integration.test_sasl_acl import _consume, _produce

pytestmark = pytest.mark.timeout(300)
CLUSTER, CID = "events", "MkU3OEVBNTcwNTJENDM2Qg"
HOST = "localhost"   # the name the broker certificate carries (the pods' names in Kubernetes)


class Env:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], files: dict[str, Path],
                 operator: Target, clients_ca: pki.KeyPair, cs: ClusterSpec) -> None:
        self.broker, self.ports, self.files = broker, ports, files
        self.operator, self.clients_ca, self.cs = operator, clients_ca, cs

    def scram(self, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": f"{HOST}:{self.ports['scram']}",
                "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": str(self.files["ca"])}

    def admin(self) -> "object":
        return self.operator.admin(15.0)


def _run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("operator-security")
    scram_port, mtls_port, replication, controller = free_ports(4)
    cs = parse_cluster(CLUSTER, "ns", {
        "replicas": 1, "authorization": {"type": "simple"},
        "listeners": [{"name": "scram", "port": scram_port, "tls": True,
                       "authentication": {"type": "scram-sha-512"}},
                      {"name": "mtls", "port": mtls_port, "tls": True,
                       "authentication": {"type": "tls"}}]})
    now = datetime.datetime.now(datetime.timezone.utc)
    cluster_ca = pki.new_ca("cluster CA", now, 30)
    clients_ca = pki.new_ca("clients CA", now, 30)
    broker_cert = pki.issue_cert(cluster_ca, names.broker_common_name(CLUSTER), [HOST], now, 5,
                                 client=True, server=True, organization=names.CERT_ORGANIZATION)
    operator_cert = pki.issue_cert(cluster_ca, names.operator_common_name(CLUSTER), [], now, 5,
                                   client=True, server=False,
                                   organization=names.CERT_ORGANIZATION)
    # The files of the broker certificate Secret, where the rendered properties expect them.
    files = {"keystore": d / bc.KEYSTORE_KEY, "ca": d / bc.CLUSTER_CA_KEY,
             "clients": d / bc.CLIENTS_CA_KEY}
    files["keystore"].write_text(broker_cert.key_pem + broker_cert.cert_pem)
    files["ca"].write_text(cluster_ca.cert_pem)
    files["clients"].write_text(clients_ca.cert_pem)
    props = {k: v.replace(bc.CERTS_MOUNT, str(d)) if isinstance(v, str) else v
             for k, v in bc.security_settings(cs).items()}
    ports = {"scram": scram_port, "mtls": mtls_port, "replication": replication}
    listen = {"SCRAM": scram_port, "MTLS": mtls_port, bc.REPLICATION: replication}
    b = BrokerProcess(d / "data", port=replication, ready=listening, config={
        **props, "process.roles": "broker,controller",
        "controller.listener.names": bc.CONTROLLER,
        "controller.quorum.voters": f"1@{HOST}:{controller}",
        "listeners": ",".join([f"{n}://127.0.0.1:{p}" for n, p in listen.items()]
                              + [f"{bc.CONTROLLER}://127.0.0.1:{controller}"]),
        "advertised.listeners": ",".join(f"{n}://{HOST}:{p}" for n, p in listen.items()),
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "connection.failed.authentication.delay.ms": 50})
    b.start(timeout=60)
    target = Target(f"{HOST}:{replication}", client_context(operator_cert, cluster_ca.cert_pem))
    try:
        yield Env(b, ports, files, target, clients_ca, cs)
    finally:
        b.stop()


def _apply_user(env: Env, raw: dict, name: str, password: str | None) -> None:
    """What the User handler does against the cluster for this spec."""
    us = parse_user(name, "ns", raw)

    async def go() -> None:
        async with env.admin() as admin:
            if password is not None:
                await security.upsert_scram(admin, name, password)
            have = await security.describe_acls(admin, us.principal)
            await security.create_acls(admin, desired_acls(us) - have)
            await security.delete_acls(admin, have - desired_acls(us))
    _run(go())


def _refused_login(conf: dict) -> bool:
    """Whether the broker refuses this client's SASL login (an authentication error, not a
    timeout or an authorization refusal)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient
    seen: list = []
    client = AdminClient({**conf, "reconnect.backoff.max.ms": 1000, "error_cb": seen.append})
    with pytest.raises(KafkaException):
        client.list_topics(timeout=5)
    client.poll(1)
    return any(e.code() == KafkaError._AUTHENTICATION for e in seen)


def _rules(topic: str, group_prefix: str) -> dict:
    return {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": topic}, "operations": ["Write", "Read",
                                                                      "Describe"]},
        {"resource": {"type": "group", "name": group_prefix, "patternType": "prefix"},
         "operations": ["Read"]}]}


def _topic(env: Env) -> str:
    name = f"sec-{uuid.uuid4().hex[:6]}"

    async def go() -> None:
        async with env.admin() as admin:
            await admin.create_topic(name, 2, 1)
    _run(go())
    return name


def test_the_operators_certificate_is_a_super_user_on_the_replication_listener(env):
    async def describe(target: Target) -> set:
        async with target.admin(15.0) as admin:
            return await security.describe_acls(admin)
    assert isinstance(_run(describe(env.operator)), set)   # needs DESCRIBE on the cluster
    # A clients-CA certificate with the operator's common name, on the mTLS listener, is a
    # User (User:CN=<name>, no O=rillet.io), not the operator: no cluster rights.
    now = datetime.datetime.now(datetime.timezone.utc)
    impostor = pki.issue_cert(env.clients_ca, names.operator_common_name(CLUSTER), [], now, 1,
                              client=True, server=False)
    assert pki.principal_of(impostor.cert_pem) not in bc.super_users(env.cs)
    target = Target(f"{HOST}:{env.ports['mtls']}",
                    client_context(impostor, env.files["ca"].read_text()))
    with pytest.raises(Exception, match="ClusterAuthorizationFailed"):
        _run(describe(target))


def test_a_scram_user_set_by_the_operator_produces_and_consumes_within_its_acls(env):
    topic = _topic(env)
    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"},
                      "authorization": _rules(topic, "alice-")}, "alice", "alice-pw")

    async def mechanisms() -> set[str]:
        async with env.admin() as admin:
            return await security.scram_mechanisms(admin, "alice")
    assert _run(mechanisms()) == {"SCRAM-SHA-512"}
    values = [f"v{i}".encode() for i in range(20)]
    assert _produce(env.scram("alice", "alice-pw"), topic, values) == []
    got, errs = _consume(env.scram("alice", "alice-pw"), topic, "alice-g1", 20)
    assert errs == [] and sorted(got) == sorted(values)
    # A group outside its prefix is refused; so is a wrong password.
    _, errs = _consume(env.scram("alice", "alice-pw"), topic, "other-group", 1, timeout=15)
    assert errs and "GROUP_AUTHORIZATION_FAILED" in str(errs[0])
    assert _refused_login(env.scram("alice", "wrong"))


def test_a_user_without_acls_is_refused_and_deletion_removes_credentials_and_acls(env):
    topic = _topic(env)
    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}},
                "bob", "bob-pw")
    failures = _produce(env.scram("bob", "bob-pw"), topic, [b"x"])
    assert failures and "TOPIC_AUTHORIZATION_FAILED" in str(failures[0])

    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"},
                      "authorization": _rules(topic, "carol-")}, "carol", "carol-pw")
    assert _produce(env.scram("carol", "carol-pw"), topic, [b"ok"]) == []

    async def remove() -> tuple[int, bool]:   # what the delete handler does
        async with env.admin() as admin:
            removed = await security.delete_acls(
                admin, await security.describe_acls(admin, "User:carol"))
            return removed, await security.delete_scram(admin, "carol")
    assert _run(remove()) == (4, True)

    async def after() -> tuple[set, set, bool]:
        async with env.admin() as admin:
            return (await security.describe_acls(admin, "User:carol"),
                    await security.scram_mechanisms(admin, "carol"),
                    await security.delete_scram(admin, "carol"))
    assert _run(after()) == (set(), set(), False)
    assert _refused_login(env.scram("carol", "carol-pw"))


def test_a_tls_user_certificate_from_the_clients_ca_is_held_to_its_acls(env, tmp_path):
    topic = _topic(env)
    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "tls"},
                      "authorization": _rules(topic, "dave-")}, "dave", None)
    now = datetime.datetime.now(datetime.timezone.utc)
    certs = {}
    for user in ("dave", "erin"):
        kp = pki.issue_cert(env.clients_ca, user, [], now, 5, client=True, server=False)
        (tmp_path / f"{user}.crt").write_text(kp.cert_pem)
        (tmp_path / f"{user}.key").write_text(kp.key_pem)
        certs[user] = {"bootstrap.servers": f"{HOST}:{env.ports['mtls']}",
                       "security.protocol": "SSL", "ssl.ca.location": str(env.files["ca"]),
                       "ssl.certificate.location": str(tmp_path / f"{user}.crt"),
                       "ssl.key.location": str(tmp_path / f"{user}.key")}
    assert _produce(certs["dave"], topic, [b"a", b"b"]) == []
    got, errs = _consume(certs["dave"], topic, "dave-1", 2)
    assert errs == [] and sorted(got) == [b"a", b"b"]
    failures = _produce(certs["erin"], topic, [b"x"])   # certified, but no ACLs
    assert failures and "TOPIC_AUTHORIZATION_FAILED" in str(failures[0])


def test_aiokafka_over_sasl_ssl_and_mtls(env, tmp_path):
    """aiokafka with a SCRAM-SHA-512 User on the SASL_SSL listener, and with a clients-CA
    certificate on the mTLS one (kafka-python and confluent-kafka are the e2e Jobs' clients,
    confluent-kafka the tests above, Kafka's Java tools tests/integration/test_sasl_acl.py and test_tls.py)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    topic = _topic(env)
    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"},
                      "authorization": _rules(topic, "frank-")}, "frank", "frank-pw")
    _apply_user(env, {"cluster": CLUSTER, "authentication": {"type": "tls"},
                      "authorization": _rules(topic, "gina-")}, "gina", None)
    kp = pki.issue_cert(env.clients_ca, "gina", [], datetime.datetime.now(
        datetime.timezone.utc), 5, client=True, server=False)
    (tmp_path / "gina.crt").write_text(kp.cert_pem)
    (tmp_path / "gina.key").write_text(kp.key_pem)
    scram = {"bootstrap_servers": f"{HOST}:{env.ports['scram']}",
             "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
             "sasl_plain_username": "frank", "sasl_plain_password": "frank-pw",
             "ssl_context": create_ssl_context(cafile=str(env.files["ca"]))}
    mtls = {"bootstrap_servers": f"{HOST}:{env.ports['mtls']}", "security_protocol": "SSL",
            "ssl_context": create_ssl_context(cafile=str(env.files["ca"]),
                                              certfile=str(tmp_path / "gina.crt"),
                                              keyfile=str(tmp_path / "gina.key"))}

    async def round_trip(conf: dict, group: str, values: list[bytes]) -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **conf)
        await producer.start()
        try:
            for v in values:
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                    **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while not set(values) <= set(got):
                    batch = await consumer.getmany(timeout_ms=1000)
                    got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()
        return got

    frank = [f"f{i}".encode() for i in range(5)]
    assert set(frank) <= set(_run(round_trip(scram, "frank-g", frank)))
    gina = [f"g{i}".encode() for i in range(5)]
    assert set(gina) <= set(_run(round_trip(mtls, "gina-g", gina)))


def test_a_users_spec_quotas_are_applied_changed_and_removed(env):
    """What the User handler does with spec.quotas (handlers/user.py _apply_quotas), through
    the operator's own connection, as the broker stores and describes it."""
    entity = user_entity("User:dave")

    async def apply(spec_quotas: dict) -> dict:
        us = parse_user("dave", "ns", {"cluster": CLUSTER, "quotas": spec_quotas,
                                       "authentication": {"type": "scram-sha-512"}})
        async with env.admin() as admin:
            await quotas.alter_quotas(admin, entity, quota_changes(
                dict(us.quotas), await quotas.describe_quotas(admin, entity)))
            return await quotas.describe_quotas(admin, entity)

    assert _run(apply({"producerByteRate": 1048576, "requestPercentage": 50})) == {
        "producer_byte_rate": 1048576.0, "request_percentage": 50.0}
    assert _run(apply({"consumerByteRate": 2048, "requestPercentage": 50})) == {
        "consumer_byte_rate": 2048.0, "request_percentage": 50.0}
    assert _run(apply({})) == {}
