"""SASL logins from old clients (issue 32): SaslHandshake v0-1, as Kafka 3.x serves them.

librdkafka 2.0.2 (Debian 12's, here through the confluent-kafka 2.0.2 wheel that bundles it)
refuses SASL unless the broker's SaslHandshake range overlaps 0-0, then sends v1;
kafka-python 2.0.2 sends v0 and then the bare SASL tokens with no SaslAuthenticate
framing. Both log in with PLAIN and SCRAM, produce, and read back in a consumer group that
commits (the group APIs at the versions these releases send). The v0 exchange is also
driven byte by byte on a socket (right and wrong password), and a refused handshake must be
logged with its mechanism, version and peer.

One SASL_PLAINTEXT broker for the module: PLAIN users from the JAAS line, SCRAM users made
with AlterUserScramCredentials, no authorizer.
"""
from __future__ import annotations

import struct
import uuid
from typing import Iterator

import pytest

from tests.harness import BrokerProcess, listening
from tests.integration.old_clients import old_clients, run_login  # noqa: F401 (fixture)
from tests.polling import wait_until
from tests.wire import Wire

pytestmark = pytest.mark.timeout(600)   # the first run builds the old clients' venvs

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_carol="carol-secret";')
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
COUNT = 5


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-old") / "data", ready=listening, config={
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "50",
        "group.initial.rebalance.delay.ms": "0"})
    b.config["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port}"
    b.start()
    try:
        _add_scram_user(b.bootstrap)
        yield b
    finally:
        b.stop()


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                        "sasl.password": "admin-secret"})


def _add_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    upserts = [UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(m, 4096),
                                            SCRAM_PASSWORD.encode())
               for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    admin = _admin(bootstrap)   # held: the futures fail if the client is collected
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)


def _topic(bootstrap: str) -> str:
    from confluent_kafka.admin import NewTopic
    name = f"old-{uuid.uuid4().hex[:8]}"
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


LOGINS = [("confluent-kafka", "PLAIN", "carol", "carol-secret"),
          ("confluent-kafka", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
          ("kafka-python", "PLAIN", "carol", "carol-secret"),
          ("kafka-python", "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)]


@pytest.mark.parametrize("client,mechanism,user,password", LOGINS,
                         ids=[f"{c}-{m}" for c, m, _, _ in LOGINS])
def test_old_clients_log_in_produce_and_consume(
        sasl_broker: BrokerProcess, old_clients, client: str,  # noqa: F811
        mechanism: str, user: str, password: str) -> None:
    topic = _topic(sasl_broker.bootstrap)
    report = run_login(old_clients, client, bootstrap=sasl_broker.bootstrap,
                       mechanism=mechanism, user=user, password=password, topic=topic,
                       group=f"{topic}-g", count=COUNT)
    assert report["ok"], report
    assert report["version"] == "2.0.2", report
    prefix = "kafka-python" if client == "kafka-python" else "librdkafka"
    assert report["read"] == [f"{prefix}-{i}" for i in range(COUNT)], report
    assert report["committed"] == COUNT, report


def test_kafka_python_202_wrong_password_is_refused_and_logged(
        sasl_broker, old_clients) -> None:  # noqa: F811
    report = run_login(old_clients, "kafka-python", bootstrap=sasl_broker.bootstrap,
                       mechanism="SCRAM-SHA-512", user=SCRAM_USER,
                       password="Pa55-not-alices", topic="unused", group="unused", count=1)
    assert not report["ok"], report
    wait_until(lambda: "SCRAM-SHA-512, SaslHandshake v0): SCRAM-SHA-512 exchange for "
                       "'alice' failed" in sasl_broker.log(), 10, "the failed v0 login logged")
    assert "Pa55-not-alices" not in sasl_broker.log()   # no password logged
    assert sasl_broker.alive()


def _handshake(wire: Wire, version: int, mechanism: str) -> tuple[int, list[str]]:
    resp = wire.request(17, version, {"mechanism": mechanism})
    return resp.error_code, list(resp.mechanisms)


def _token(wire: Wire, token: bytes) -> None:
    wire.send_raw(struct.pack(">i", len(token)) + token)


def test_handshake_v0_bare_plain_token_then_requests(sasl_broker: BrokerProcess) -> None:
    with Wire(sasl_broker.bootstrap) as wire:
        assert _handshake(wire, 0, "PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256",
                                                    "SCRAM-SHA-512"])
        _token(wire, b"\0carol\0carol-secret")
        assert wire.recv_frame() == b""         # PLAIN's empty answer: a zero size
        meta = wire.request(3, 1, {"topics": None})
        assert [b.node_id for b in meta.brokers] == [1]


def test_handshake_v0_wrong_password_closes_without_an_answer(sasl_broker) -> None:
    with Wire(sasl_broker.bootstrap) as wire:
        assert _handshake(wire, 0, "PLAIN")[0] == 0
        _token(wire, b"\0carol\0not-carols")
        assert wire.is_closed()
    wait_until(lambda: "PLAIN, SaslHandshake v0): wrong user name or password for 'carol'"
               in sasl_broker.log(), 10, "the failed v0 PLAIN login logged")


def test_refused_handshakes_are_logged_with_mechanism_version_and_peer(sasl_broker) -> None:
    with Wire(sasl_broker.bootstrap) as wire:
        assert _handshake(wire, 1, "GSSAPI")[0] == 33          # UNSUPPORTED_SASL_MECHANISM
        port = wire.sock.getsockname()[1]
    wait_until(lambda: f"refused SaslHandshake v1 for mechanism GSSAPI from 127.0.0.1:{port} "
                       f"on listener SASL_PLAINTEXT" in sasl_broker.log(), 10,
               "the refused handshake logged")
    with Wire(sasl_broker.bootstrap) as wire:
        assert _handshake(wire, 0, "PLAIN")[0] == 0
        _token(wire, b"\0carol\0carol-secret")
        assert wire.recv_frame() == b""
        assert _handshake(wire, 0, "PLAIN")[0] == 34            # ILLEGAL_SASL_STATE
        assert wire.is_closed()
    wait_until(lambda: "refused SaslHandshake v0 for mechanism PLAIN" in sasl_broker.log()
               and "a second handshake on this connection" in sasl_broker.log(), 10,
               "the second handshake's refusal logged")
