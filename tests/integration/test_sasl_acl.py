"""SASL (PLAIN, SCRAM-SHA-256/512) and ACLs against real clients.

One broker with two client listeners: SASL_PLAINTEXT (PLAIN and SCRAM) and SASL_SSL (SCRAM
only, set per listener), the StandardAuthorizer on and User:admin (PLAIN) its super user.
SCRAM users are created the way Kafka users create them (AlterUserScramCredentials from an
admin client, kafka-configs); ACLs with create_acls and kafka-acls. kafka-python,
confluent-kafka, aiokafka and Kafka's Java tools authenticate; wrong credentials and
requests before authentication are refused and logged; ACLs allow and deny produce,
consume, groups and topic creation; Metadata hides what a principal may not describe. A
three-node cluster checks that requests forwarded to the controller are judged as the
client (Envelope), not as the forwarding broker.
"""
from __future__ import annotations

import asyncio
import socket
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import trustme

from tests.cluster import LocalCluster
from tests.harness import BrokerProcess, free_port, free_ports, listening
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(300)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "dave": "dave-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ca = trustme.CA(organization_name="rillet sasl test CA")
    d = tmp_path_factory.mktemp("sasl-pki")
    files = {"ca": d / "ca.pem", "broker": d / "broker.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(files["broker"]))
    return files


class Secured:
    def __init__(self, broker: BrokerProcess, ssl_port: int, ca: Path) -> None:
        self.broker = broker
        self.ca = ca
        self.sasl = broker.bootstrap
        self.sasl_ssl = f"127.0.0.1:{ssl_port}"

    def confluent(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                  tls: bool = False) -> dict[str, str]:
        conf = {"bootstrap.servers": self.sasl_ssl if tls else self.sasl,
                "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        if tls:
            conf["ssl.ca.location"] = str(self.ca)
        return conf

    def kafka_python(self, user: str, password: str,
                     mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        return {"bootstrap_servers": self.sasl, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                "sasl_plain_password": password}

    def admin(self) -> "object":
        from confluent_kafka.admin import AdminClient
        return AdminClient(self.confluent("admin", "admin-secret", "PLAIN"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki) -> Iterator[Secured]:
    ssl_port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("sasl") / "data", ready=listening, config={
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(pki["broker"]),
        "authorizer.class.name": STANDARD, "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "50"})
    b.config["listeners"] = (f"SASL_PLAINTEXT://127.0.0.1:{b.port},"
                             f"SASL_SSL://127.0.0.1:{ssl_port}")
    b.start()
    env = Secured(b, ssl_port, pki["ca"])
    _add_scram_users(env.admin(), {"alice": ["SCRAM-SHA-512", "SCRAM-SHA-256"],
                                   "bob": ["SCRAM-SHA-512"]})
    try:
        yield env
    finally:
        b.stop()


def _add_scram_users(admin, users: dict[str, list[str]]) -> None:
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    upserts = [UserScramCredentialUpsertion(
        user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 8192),
        PASSWORDS[user].encode()) for user, mechs in users.items() for m in mechs]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        future.result(30)


def _grant(admin, *bindings: tuple) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    acls = [AclBinding(getattr(ResourceType, rtype), name,
                       getattr(ResourcePatternType, pattern), principal, "*",
                       getattr(AclOperation, op), getattr(AclPermissionType, perm))
            for rtype, name, pattern, principal, op, perm in bindings]
    for future in admin.create_acls(acls).values():
        future.result(30)


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _produce(conf: dict, topic: str, values: list[bytes]) -> list:
    from confluent_kafka import Producer
    producer = Producer({**conf, "acks": "all", "message.timeout.ms": 15000})
    failures: list = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _m: failures.append(err) if err
                         else None)
    producer.flush(30)
    return failures


def _consume(conf: dict, topic: str, group: str, count: int, timeout: float = 30) -> tuple:
    from confluent_kafka import Consumer
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    errs: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and not errs and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            errs.append(m.error())
        else:
            got.append(m.value())
    consumer.close()
    return got, errs


def test_scram_users_produce_and_consume_with_each_client(secured: Secured) -> None:
    from aiokafka import AIOKafkaConsumer
    from confluent_kafka.admin import NewTopic
    from kafka import KafkaProducer
    topic = _name("alice-")
    admin = secured.admin()
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    _grant(admin, ("TOPIC", "alice-", "PREFIXED", "User:alice", "WRITE", "ALLOW"),
           ("TOPIC", "alice-", "PREFIXED", "User:alice", "READ", "ALLOW"),
           ("GROUP", "alice-", "PREFIXED", "User:alice", "READ", "ALLOW"))
    # kafka-python, SCRAM-SHA-512 on SASL_PLAINTEXT
    producer = KafkaProducer(acks="all", **secured.kafka_python("alice", "alice-secret"))
    for i in range(10):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    # confluent-kafka, SCRAM-SHA-512 over TLS (the SASL_SSL listener), idempotent
    assert _produce(secured.confluent("alice", "alice-secret", tls=True), topic,
                    [f"ck-{i}".encode() for i in range(10)]) == []

    async def aio() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=secured.sasl, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
            sasl_plain_password="alice-secret", group_id=_name("alice-g"),
            auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < 20:
                    batch = await consumer.getmany(timeout_ms=1000)
                    got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()
        return got
    got = asyncio.run(aio())
    assert sorted(got) == sorted([f"kp-{i}".encode() for i in range(10)] +
                                 [f"ck-{i}".encode() for i in range(10)])


def test_wrong_credentials_are_refused_and_logged_without_harm_to_others(secured) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient
    good = AdminClient(secured.confluent("admin", "admin-secret", "PLAIN"))
    good.list_topics(timeout=15)
    for user, password, mechanism in (("alice", "wrong", "SCRAM-SHA-512"),
                                      ("mallory", "x", "SCRAM-SHA-512"),
                                      ("admin", "wrong", "PLAIN"),
                                      ("alice", "alice-secret", "SCRAM-SHA-256")):
        tls = mechanism == "SCRAM-SHA-256"   # not enabled on the SASL_SSL listener
        seen: list = []
        bad = AdminClient({**secured.confluent(user, password, mechanism, tls=tls),
                           "reconnect.backoff.max.ms": 1000, "error_cb": seen.append})
        with pytest.raises(KafkaException):
            bad.list_topics(timeout=5)
        bad.poll(1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in seen), seen
    # The whole file: the refused SCRAM-SHA-256 handshakes (one line per reconnect of the
    # clients above) can push the first lines out of log()'s tail.
    log = secured.broker.log_path.read_text(errors="replace")
    assert "authentication failed on listener SASL_PLAINTEXT" in log
    assert "refused SaslHandshake v1 for mechanism SCRAM-SHA-256" in log
    assert "wrong" not in log.replace("wrong user name or password", "")  # no password logged
    assert good.list_topics(timeout=15).brokers          # the good connection carries on
    assert secured.broker.alive()


def _raw(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(len(frame).to_bytes(4, "big") + frame)
        s.settimeout(10)
        try:
            return s.recv(1 << 16)
        except (ConnectionResetError, socket.timeout):
            return b""


def _header(key: int, version: int) -> bytes:
    return key.to_bytes(2, "big") + version.to_bytes(2, "big") + (7).to_bytes(4, "big") + \
        (4).to_bytes(2, "big") + b"test"


def test_requests_before_authentication_close_the_connection(secured) -> None:
    port = secured.broker.port
    # ApiVersions is allowed before authenticating (clients need it to pick versions) ...
    assert len(_raw(port, _header(18, 0))) > 8
    # ... a Metadata request is not: the connection is closed, the reason logged.
    assert _raw(port, _header(3, 1) + (-1).to_bytes(4, "big", signed=True)) == b""
    wait_until(lambda: "metadata (3) sent before SASL authentication" in secured.broker.log(),
               10, "the refusal logged")
    assert secured.broker.alive()


def test_acls_allow_and_deny_produce_consume_groups_and_creation(secured) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = secured.admin()
    topic = _name("shared-")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert _produce(secured.confluent("admin", "admin-secret", "PLAIN"), topic,
                    [b"one", b"two"]) == []
    bob = secured.confluent("bob", "bob-secret")
    # Metadata: a topic bob may not describe is not listed, and named it is refused.
    bob_admin = AdminClient(bob)
    assert topic not in bob_admin.list_topics(timeout=15).topics
    assert topic not in bob_admin.list_topics(topic, timeout=15).topics or \
        bob_admin.list_topics(topic, timeout=15).topics[topic].error is not None
    # Produce without WRITE: TOPIC_AUTHORIZATION_FAILED, nothing written.
    failures = _produce(bob, topic, [b"nope"])
    assert failures and all(f.name() == "TOPIC_AUTHORIZATION_FAILED" for f in failures)
    # READ on the topic but not on the group: GROUP_AUTHORIZATION_FAILED.
    _grant(admin, ("TOPIC", topic, "LITERAL", "User:bob", "READ", "ALLOW"))
    assert topic in bob_admin.list_topics(timeout=15).topics   # READ implies DESCRIBE
    group = _name("bob-g")
    got, errs = _consume(bob, topic, group, 2, timeout=20)
    assert got == [] and errs and errs[0].name() == "GROUP_AUTHORIZATION_FAILED", errs
    _grant(admin, ("GROUP", group, "LITERAL", "User:bob", "READ", "ALLOW"))
    got, errs = _consume(bob, topic, group, 2)
    assert got == [b"one", b"two"] and errs == []
    # An explicit DENY beats the ALLOW.
    _grant(admin, ("TOPIC", topic, "LITERAL", "User:bob", "READ", "DENY"))
    got, errs = _consume(bob, topic, _name("bob-g"), 1, timeout=15)
    assert got == [] and errs
    # Creating topics needs CREATE: refused for bob, allowed once granted on a prefix.
    fresh = _name("bob-new-")
    with pytest.raises(Exception) as err:
        bob_admin.create_topics([NewTopic(fresh, 1, 1)])[fresh].result(30)
    assert "TOPIC_AUTHORIZATION_FAILED" in str(err.value)
    _grant(admin, ("TOPIC", "bob-new-", "PREFIXED", "User:bob", "CREATE", "ALLOW"))
    bob_admin.create_topics([NewTopic(fresh, 1, 1)])[fresh].result(30)
    assert "denied: principal=User:bob" in secured.broker.log()


def test_kafka_acls_and_kafka_configs_manage_users_and_rules(secured, kafka_jars,  # noqa: F811
                                                             tmp_path) -> None:
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n')
    carol_props = tmp_path / "carol.properties"
    carol_props.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="carol" password="carol-secret";\n')
    tools = KafkaTools(secured.sasl)
    topic = _name("carol-")
    tools.run("kafka-configs", "--bootstrap-server", secured.sasl, "--command-config",
              str(admin_props), "--alter", "--entity-type", "users", "--entity-name", "carol",
              "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]").ok()
    described = tools.run("kafka-configs", "--bootstrap-server", secured.sasl,
                          "--command-config", str(admin_props), "--describe",
                          "--entity-type", "users", "--entity-name", "carol").ok()
    assert "SCRAM-SHA-512=iterations=8192" in described.stdout
    tools.topics("--create", "--topic", topic, "--partitions", "1", "--replication-factor",
                 "1", "--command-config", str(admin_props)).ok()
    acl = ("kafka-acls", "--bootstrap-server", secured.sasl, "--command-config",
           str(admin_props))
    tools.run(*acl, "--add", "--allow-principal", "User:carol", "--operation", "Write",
              "--operation", "Describe", "--topic", topic).ok()
    listed = tools.run(*acl, "--list", "--topic", topic).ok()
    assert "principal=User:carol" in listed.stdout and "operation=WRITE" in listed.stdout
    ssl_tools = KafkaTools(secured.sasl_ssl)
    ssl_tools.produce_lines(topic, ["k:v1", "k:v2"], "--producer.config", str(carol_props)).ok()
    tools.run(*acl, "--remove", "--force", "--allow-principal", "User:carol", "--operation",
              "Write", "--topic", topic).ok()
    assert "operation=WRITE" not in tools.run(*acl, "--list", "--topic", topic).ok().stdout
    ssl_tools.produce_lines(topic, ["k:v3"], "--producer.config", str(carol_props),
                            "--producer-property", "max.block.ms=10000")
    # (an idempotent producer: refused IDEMPOTENT_WRITE first, as WRITE is gone)
    assert "denied: principal=User:carol host=127.0.0.1" in secured.broker.log()
    end = tools.run("kafka-get-offsets", "--bootstrap-server", secured.sasl,
                    "--command-config", str(admin_props), "--topic", topic).ok()
    assert f"{topic}:0:2" in end.stdout


def _scram_props(path: Path, ca: Path, user: str, password: str) -> Path:
    path.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n')
    return path


def test_kafka_java_tools_over_sasl_ssl_with_scram_sha_512(secured, kafka_jars,  # noqa: F811
                                                           tmp_path) -> None:
    """Kafka's console producer and consumer on the SASL_SSL listener as a SCRAM-SHA-512 user
    created with AlterUserScramCredentials (a record in the metadata log); a Java producer with
    the wrong password fails with an authentication error, writes nothing, and the broker
    carries on serving the right one."""
    from confluent_kafka.admin import NewTopic
    admin = secured.admin()
    _add_scram_users(admin, {"dave": ["SCRAM-SHA-512"]})
    topic = _name("dave-")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    _grant(admin, ("TOPIC", "dave-", "PREFIXED", "User:dave", "WRITE", "ALLOW"),
           ("TOPIC", "dave-", "PREFIXED", "User:dave", "READ", "ALLOW"),
           ("GROUP", "dave-", "PREFIXED", "User:dave", "READ", "ALLOW"))
    good = _scram_props(tmp_path / "dave.properties", secured.ca, "dave", PASSWORDS["dave"])
    bad = _scram_props(tmp_path / "intruder.properties", secured.ca, "dave", "not-daves-secret")
    tools = KafkaTools(secured.sasl_ssl)
    count = 25
    tools.produce_lines(topic, [f"k{i}:scram-{i}" for i in range(count)],
                        "--producer.config", str(good)).ok()

    refused = tools.produce_lines(topic, ["k:intruder"], "--producer.config", str(bad),
                                  "--producer-property", "max.block.ms=10000")
    output = refused.stdout + refused.stderr
    assert "SaslAuthenticationException" in output and \
        "invalid credentials with SASL mechanism SCRAM-SHA-512" in output, refused.describe()
    wait_until(lambda: "authentication failed on listener SASL_SSL" in secured.broker.log(),
               10, "the refusal logged")
    assert "not-daves-secret" not in secured.broker.log()   # no password logged
    assert secured.broker.alive()

    out = tools.consume(topic, count, "--from-beginning", "--group", _name("dave-g"),
                        "--command-config", str(good)).ok()
    assert sorted(line.rsplit("\t", 1)[-1] for line in out.lines
                  if line.startswith("Partition:")) == sorted(f"scram-{i}" for i in range(count))
    # Nothing from the refused producer: the log end offsets (asked as admin) add up to count.
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n')
    ends = tools.run("kafka-get-offsets", "--bootstrap-server", secured.sasl,
                     "--command-config", str(admin_props), "--topic", topic).ok()
    assert sum(int(line.rsplit(":", 1)[1]) for line in ends.lines) == count, ends.describe()


def test_kafka_get_offsets_needs_no_cluster_acl(secured, kafka_jars,  # noqa: F811
                                               tmp_path) -> None:
    """DescribeCluster (which kafka-get-offsets sends) needs no cluster ACL, as in Kafka:
    DESCRIBE on the cluster only decides cluster_authorized_operations."""
    from confluent_kafka.admin import NewTopic
    admin = secured.admin()
    _add_scram_users(admin, {"dave": ["SCRAM-SHA-512"]})
    topic = _name("dave-")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _grant(admin, ("TOPIC", "dave-", "PREFIXED", "User:dave", "READ", "ALLOW"))
    dave = _scram_props(tmp_path / "dave.properties", secured.ca, "dave", PASSWORDS["dave"])
    ends = KafkaTools(secured.sasl_ssl).run(
        "kafka-get-offsets", "--bootstrap-server", secured.sasl_ssl, "--command-config",
        str(dave), "--topic", topic)
    assert ends.returncode == 0 and f"{topic}:0:0" in ends.stdout, ends.describe()
    # The authorized operations: none for dave, every cluster operation for a super user.
    from confluent_kafka.admin import AclOperation, AdminClient
    as_dave = AdminClient(secured.confluent("dave", PASSWORDS["dave"], tls=True))
    mine = as_dave.describe_cluster(include_authorized_operations=True).result(30)
    # confluent-kafka gives None for 0 and for "not asked" alike; the super user's answer
    # below shows the request was honoured, tests/unit/security/test_authorizer.py the 0.
    assert not mine.authorized_operations
    supers = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.CLUSTER_ACTION,
            AclOperation.IDEMPOTENT_WRITE} <= set(supers.authorized_operations)
    # On the topic: READ and the DESCRIBE it implies (and WRITE where another test of the
    # module granted dave that), never what no ACL gives him.
    from confluent_kafka import TopicCollection
    (described,) = as_dave.describe_topics(TopicCollection([topic]),
                                           include_authorized_operations=True).values()
    ops = set(described.result(30).authorized_operations)
    assert {AclOperation.READ, AclOperation.DESCRIBE} <= ops
    assert not ops & {AclOperation.DELETE, AclOperation.ALTER, AclOperation.ALTER_CONFIGS}


def _quorum_changes(cluster: LocalCluster) -> list[int]:
    """How many quorum leadership changes each node has logged so far."""
    return [cluster.node(i).log().count("quorum epoch ") for i in cluster.node_ids]


def test_forwarded_admin_requests_are_judged_as_the_client(tmp_path) -> None:
    """CreateTopics sent to a broker that is not the controller travels in an Envelope with
    the client's principal: refused for alice, done for admin; replication runs over a
    PLAINTEXT inter-broker listener beside the SASL client listener."""
    from confluent_kafka.admin import AdminClient, NewTopic
    cluster = LocalCluster(tmp_path, nodes=3, proxied=False, ready=listening)
    repl_ports = free_ports(3)
    for i, port in zip(cluster.node_ids, repl_ports):
        node = cluster.node(i)
        client, controller = node.config["listeners"].split(",")
        node.config.update({
            "listeners": f"SASL{client[client.index(':'):]},REPL://127.0.0.1:{port},"
                         f"{controller}",
            "listener.security.protocol.map": "SASL:SASL_PLAINTEXT,REPL:PLAINTEXT,"
                                              "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "REPL",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS.replace(
                ';', ' user_alice="alice-secret";'),
            "authorizer.class.name": STANDARD,
            # Replication arrives on the PLAINTEXT REPL listener, as User:ANONYMOUS.
            "super.users": "User:admin;User:ANONYMOUS"})
    try:
        cluster.start()
        elections = _quorum_changes(cluster)
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
        for i in cluster.node_ids:
            # Each node in turn: two of the three relay to the active controller.
            alice = AdminClient({**conf, "bootstrap.servers": cluster.node(i).bootstrap,
                                 "sasl.username": "alice", "sasl.password": "alice-secret"})
            name = _name("fwd-")
            with pytest.raises(Exception) as err:
                alice.create_topics([NewTopic(name, 1, 3)])[name].result(30)
            assert "TOPIC_AUTHORIZATION_FAILED" in str(err.value)
            admin = AdminClient({**conf, "bootstrap.servers": cluster.node(i).bootstrap,
                                 "sasl.username": "admin", "sasl.password": "admin-secret"})
            admin.create_topics([NewTopic(name, 2, 3)])[name].result(30)
        assert _produce({**conf, "bootstrap.servers": cluster.bootstrap,
                         "sasl.username": "admin", "sasl.password": "admin-secret"},
                        name, [b"r%d" % i for i in range(20)]) == []
        # The controller judged all three (as alice); a relaying broker judged none itself.
        denials = {i: cluster.node(i).log().count("denied: principal=User:alice")
                   for i in cluster.node_ids}
        assert sum(denials.values()) == 3, cluster.logs()
        # Unless a stalled node cost the controller its leadership meanwhile, one node judged;
        # if one did, only nodes that have led the quorum judged.
        if _quorum_changes(cluster) == elections:
            assert sorted(denials.values()) == [0, 0, 3], cluster.logs()
        for i, count in denials.items():
            assert not count or f"(this node {i} is leader)" in cluster.node(i).log(), denials
    finally:
        cluster.close()
