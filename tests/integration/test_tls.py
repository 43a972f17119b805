"""TLS listeners (security protocol SSL) against real clients: kafka-python, confluent-kafka,
aiokafka and Kafka's Java tools; client certificates (mTLS); a plaintext client on the TLS port
refused and logged without harm to others; a renewed certificate picked up without a restart;
a three-node cluster whose controller and replication traffic is TLS with client certificates.

Certificates come from trustme (a throwaway CA per module)."""
from __future__ import annotations

import asyncio
import socket
import ssl
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import trustme

from tests.cluster import LocalCluster
from tests.harness import BrokerProcess, listening
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ca = trustme.CA(organization_name="rillet test CA")
    d = tmp_path_factory.mktemp("pki")
    files = {"ca": d / "ca.pem", "broker": d / "broker.pem", "client": d / "client.pem",
             "client_cert": d / "client.crt", "client_key": d / "client.key",
             "stranger": d / "stranger.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    ca.issue_cert("127.0.0.1", "localhost", common_name="broker") \
        .private_key_and_cert_chain_pem.write_to_path(str(files["broker"]))
    client = ca.issue_cert("client.test", common_name="orders-app",
                           organization_unit_name="payments")
    client.private_key_and_cert_chain_pem.write_to_path(str(files["client"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    # signed by another CA: a certificate the broker must not trust
    trustme.CA().issue_cert("client.test").private_key_and_cert_chain_pem.write_to_path(
        str(files["stranger"]))
    files["_ca"] = ca  # type: ignore[assignment]
    return files


def _tls_broker(tmp_path: Path, pki: dict[str, Path], **extra: str) -> BrokerProcess:
    b = BrokerProcess(tmp_path / "data", config={
        "ssl.keystore.location": str(pki["broker"]),
        "ssl.truststore.location": str(pki["ca"]), **extra}, ready=listening)
    b.config["listeners"] = f"SSL://{b.host}:{b.port}"
    return b.start()


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki) -> Iterator[BrokerProcess]:
    broker = _tls_broker(tmp_path_factory.mktemp("tls"), pki)
    try:
        yield broker
    finally:
        broker.stop()


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def test_kafka_python_over_tls(tls_broker: BrokerProcess, pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    topic = _topic()
    ssl_args = {"security_protocol": "SSL", "ssl_cafile": str(pki["ca"])}
    producer = KafkaProducer(bootstrap_servers=tls_broker.bootstrap, acks="all", **ssl_args)
    for i in range(20):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=tls_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000, **ssl_args)
    got = [m.value for m in consumer]
    consumer.close()
    assert got == [f"kp-{i}".encode() for i in range(20)]


def test_confluent_kafka_over_tls(tls_broker: BrokerProcess, pki) -> None:
    from confluent_kafka import Consumer, Producer
    topic = _topic()
    conf = {"bootstrap.servers": tls_broker.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"])}
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    errors: list = []
    for i in range(20):
        producer.produce(topic, f"ck-{i}".encode(),
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and errors == []
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert got == [f"ck-{i}".encode() for i in range(20)]


def test_aiokafka_over_tls(tls_broker: BrokerProcess, pki) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    topic = _topic()

    async def run() -> list[bytes]:
        ctx = create_ssl_context(cafile=str(pki["ca"]))
        producer = AIOKafkaProducer(bootstrap_servers=tls_broker.bootstrap,
                                    security_protocol="SSL", ssl_context=ctx, acks="all")
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"ak-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=tls_broker.bootstrap,
                                    security_protocol="SSL", ssl_context=ctx,
                                    auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == 20:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"ak-{i}".encode() for i in range(20)]


def test_kafka_java_tools_over_tls(tls_broker: BrokerProcess, pki, kafka_jars, tmp_path) -> None:  # noqa: F811
    """Kafka's own console tools with a PEM truststore, as a Kafka user configures them."""
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={pki['ca']}\n")
    tools = KafkaTools(tls_broker.bootstrap)
    topic = _topic()
    tools.topics("--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
                 "--command-config", str(props)).ok()
    tools.produce_lines(topic, [f"k{i}:java-{i}" for i in range(10)],
                        "--producer.config", str(props)).ok()
    out = tools.consume(topic, 10, "--from-beginning", "--command-config", str(props)).ok()
    assert sorted(line.rsplit("\t", 1)[-1] for line in out.lines
                  if line.startswith("Partition:")) == \
        sorted(f"java-{i}" for i in range(10))


def _raw_api_versions(host: str, port: int) -> bytes:
    """ApiVersions v0 in plaintext, as a client with the wrong security.protocol sends it."""
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + \
        (4).to_bytes(2, "big") + b"test"
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(len(body).to_bytes(4, "big") + body)
        s.settimeout(15)
        try:
            return s.recv(100)
        except (ConnectionResetError, socket.timeout):
            return b""


def test_a_plaintext_client_on_the_tls_port_is_refused_and_logged(tls_broker, pki) -> None:
    answer = _raw_api_versions(tls_broker.host, tls_broker.port)
    # No Kafka response comes back: at most a TLS alert record (content type 21).
    assert answer == b"" or answer[0] == 21, answer
    wait_until(lambda: "TLS handshake failed" in tls_broker.log(), 20, "the refusal logged")
    assert tls_broker.proc.poll() is None
    test_kafka_python_over_tls(tls_broker, pki)   # others unaffected


def test_many_connections_complete_their_handshake_at_once(tls_broker, pki) -> None:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))

    async def one() -> str:
        reader, writer = await asyncio.open_connection(tls_broker.host, tls_broker.port,
                                                       ssl=ctx, server_hostname="127.0.0.1")
        version = writer.get_extra_info("ssl_object").version()
        writer.close()
        return version

    async def many() -> list[str]:
        async with asyncio.timeout(60):
            return await asyncio.gather(*(one() for _ in range(60)))

    versions = asyncio.run(many())
    assert len(versions) == 60 and all(v in ("TLSv1.2", "TLSv1.3") for v in versions)


def test_an_idle_tls_connection_is_closed_after_the_setting(tmp_path, pki) -> None:
    idle_ms = 1500
    broker = _tls_broker(tmp_path, pki, **{"connections.max.idle.ms": str(idle_ms)})
    try:
        ctx = ssl.create_default_context(cafile=str(pki["ca"]))
        # Read before connecting: the broker's idle clock starts after the handshake.
        start = time.monotonic()
        with socket.create_connection((broker.host, broker.port), timeout=30) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
            port = conn.getsockname()[1]

            def closed() -> bool:
                conn.settimeout(0.5)
                try:
                    return conn.recv(1) == b""
                except TimeoutError:
                    return False
                except (ConnectionResetError, ssl.SSLError):
                    return True

            wait_until(closed, 20, "the broker to close the idle TLS connection")
            waited = time.monotonic() - start
        assert waited >= idle_ms / 1000, f"closed after {waited:.2f}s of {idle_ms} ms idle"
        assert any(f"from 127.0.0.1:{port}" in line for line in broker.log().splitlines()
                   if "closing idle connection" in line), broker.log()[-2000:]
        assert broker.proc.poll() is None
    finally:
        broker.stop()


def test_mtls_requires_a_certificate_from_the_broker_ca(tmp_path, pki) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    broker = _tls_broker(tmp_path, pki, **{"ssl.client.auth": "required"})
    try:
        base = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SSL",
                "ssl_cafile": str(pki["ca"]), "max_block_ms": 5000}
        for extra in ({}, {"ssl_certfile": str(pki["stranger"])}):
            with pytest.raises(KafkaError):   # no broker could be reached
                KafkaProducer(**base, **extra)
        wait_until(lambda: broker.log().count("TLS handshake failed") >= 2, 20,
                   "both refusals logged")
        producer = KafkaProducer(**base, ssl_certfile=str(pki["client_cert"]),
                                 ssl_keyfile=str(pki["client_key"]), acks="all")
        producer.send(_topic(), b"with a certificate").get(timeout=30)
        producer.close()
        assert broker.proc.poll() is None
    finally:
        broker.stop()


def _pkcs8_keystore(pki: dict[str, Path], path: Path) -> Path:
    """The client's key and certificate as Kafka's PEM keystore reads them: an unencrypted
    PKCS#8 key ("BEGIN PRIVATE KEY"; Kafka does not parse trustme's SEC1 "EC PRIVATE KEY")
    followed by the certificate chain, and no ssl.key.password."""
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(pki["client_key"].read_bytes(), password=None)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()) +
                     pki["client_cert"].read_bytes())
    return path


def test_kafka_java_tools_over_mtls(tmp_path, pki, kafka_jars) -> None:  # noqa: F811
    """Kafka's console tools with a client certificate (ssl.client.auth=required): the PEM
    keystore as a file (ssl.keystore.location) and inline (ssl.keystore.key and
    ssl.keystore.certificate.chain); a Java client without a certificate is refused."""
    broker = _tls_broker(tmp_path, pki, **{"ssl.client.auth": "required"})
    try:
        trust = f"security.protocol=SSL\nssl.truststore.type=PEM\n" \
                f"ssl.truststore.location={pki['ca']}\n"
        keystore = _pkcs8_keystore(pki, tmp_path / "client-keystore.pem")
        file_props = tmp_path / "mtls-file.properties"
        file_props.write_text(trust + "ssl.keystore.type=PEM\n"
                              f"ssl.keystore.location={keystore}\n")
        key_pem, cert_pem = keystore.read_text().split("-----END PRIVATE KEY-----\n")
        inline = {"ssl.keystore.key": key_pem + "-----END PRIVATE KEY-----",
                  "ssl.keystore.certificate.chain": cert_pem.strip()}
        inline_props = tmp_path / "mtls-inline.properties"   # a PEM on one line: "\n" escapes
        inline_props.write_text(trust + "ssl.keystore.type=PEM\n" + "".join(
            k + "=" + v.replace("\n", "\\n") + "\n" for k, v in inline.items()))
        no_cert_props = tmp_path / "no-cert.properties"
        no_cert_props.write_text(trust)

        tools = KafkaTools(broker.bootstrap)
        topic = _topic()
        tools.topics("--create", "--topic", topic, "--partitions", "2", "--replication-factor",
                     "1", "--command-config", str(file_props)).ok()
        tools.produce_lines(topic, [f"k{i}:mtls-{i}" for i in range(10)],
                            "--producer.config", str(file_props)).ok()
        out = tools.consume(topic, 10, "--from-beginning",
                            "--command-config", str(inline_props)).ok()
        assert sorted(line.rsplit("\t", 1)[-1] for line in out.lines
                      if line.startswith("Partition:")) == sorted(f"mtls-{i}" for i in range(10))
        assert "TLS handshake failed" not in broker.log()

        # Without a certificate the handshake is refused: nothing written, the refusal
        # logged, the broker still serving the certified client.
        refused = _produce_without_a_certificate(tools, topic, no_cert_props)
        assert refused.returncode != 0 or "Error when sending message" in refused.stderr, \
            refused.describe()
        wait_until(lambda: "TLS handshake failed: PEER_DID_NOT_RETURN_A_CERTIFICATE"
                   in broker.log(), 20, "the refusal logged")
        assert broker.alive()
        ends = tools.run("kafka-get-offsets", "--bootstrap-server", broker.bootstrap,
                         "--command-config", str(file_props), "--topic", topic).ok()
        assert sum(int(line.rsplit(":", 1)[1]) for line in ends.lines) == 10, ends.describe()
    finally:
        broker.stop()


def _produce_without_a_certificate(tools: KafkaTools, topic: str, props: Path):
    return tools.produce_lines(topic, ["k:no-certificate"], "--producer.config", str(props),
                               "--producer-property", "max.block.ms=10000")


def test_a_java_client_without_a_certificate_gets_an_ssl_authentication_error(
        tmp_path, pki, kafka_jars) -> None:  # noqa: F811
    """The refused handshake ends with its TLS alert (security/handshake_alert.py), so the
    Java client fails at once with SslAuthenticationException, as against Kafka, instead
    of retrying a bare close until max.block.ms."""
    broker = _tls_broker(tmp_path, pki, **{"ssl.client.auth": "required"})
    try:
        props = tmp_path / "no-cert.properties"
        props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                         f"ssl.truststore.location={pki['ca']}\n")
        refused = _produce_without_a_certificate(KafkaTools(broker.bootstrap), _topic(), props)
        assert "SslAuthenticationException" in refused.stdout + refused.stderr, \
            refused.describe()
    finally:
        broker.stop()


def _served_certificate(broker: BrokerProcess, ca: Path) -> bytes:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((broker.host, broker.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True)


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path, pki) -> None:
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(pki["broker"].read_bytes())
    broker = BrokerProcess(tmp_path / "data", config={
        "ssl.keystore.location": str(keystore)}, ready=listening)
    broker.config["listeners"] = f"SSL://{broker.host}:{broker.port}"
    broker.start()
    try:
        before = _served_certificate(broker, pki["ca"])
        renewed = pki["_ca"].issue_cert("127.0.0.1", common_name="broker-renewed")
        keystore.write_bytes(renewed.private_key_and_cert_chain_pem.bytes())
        wait_until(lambda: _served_certificate(broker, pki["ca"]) != before, 30,
                   "the renewed certificate served")
        assert "TLS key and certificates reloaded" in broker.log()
        pid = broker.proc.pid
        # A broken file is not taken: the last good certificate stays.
        keystore.write_text("not a certificate")
        wait_until(lambda: "do not load" in broker.log(), 30, "the broken file reported")
        assert _served_certificate(broker, pki["ca"]) == \
            ssl.PEM_cert_to_DER_cert(renewed.cert_chain_pems[0].bytes().decode())
        assert broker.proc.pid == pid and broker.proc.poll() is None
    finally:
        broker.stop()


def test_a_cluster_replicates_and_forms_its_quorum_over_mutual_tls(tmp_path, pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    cluster = LocalCluster(tmp_path, nodes=3, proxied=False, ready=listening)
    for i in cluster.node_ids:
        cluster.node(i).config.update({
            "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL",
            "ssl.keystore.location": str(pki["broker"]),
            "ssl.truststore.location": str(pki["ca"]),
            "ssl.client.auth": "required"})
    try:
        cluster.start()
        ssl_args = {"security_protocol": "SSL", "ssl_cafile": str(pki["ca"]),
                    "ssl_certfile": str(pki["client_cert"]), "ssl_keyfile": str(pki["client_key"])}
        topic = _topic()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, **ssl_args)
        admin.create_topics([NewTopic(topic, 3, 3, topic_configs={"min.insync.replicas": "3"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", **ssl_args)
        for i in range(100):
            producer.send(topic, f"r-{i}".encode()).get(timeout=60)
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000,
                                 **ssl_args)
        got = sorted(m.value for m in consumer)
        consumer.close()
        # min.insync.replicas=3 with acks=all: every record reached all three over TLS
        assert got == sorted(f"r-{i}".encode() for i in range(100))
        for i in cluster.node_ids:
            assert "TLS handshake failed" not in cluster.node(i).log()
    finally:
        cluster.close()
