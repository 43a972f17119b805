"""What a broker loads follows its config and what it is asked (issue 30): a plaintext node
without the admin HTTP endpoint imports neither the Prometheus client (nothing could scrape
it), nor the SASL exchanges or the SCRAM library (no SASL listener), nor the TLS contexts
(no SSL listener), nor the admin client, nor the group or the transaction coordinator
(rillet/on_demand.py) while no client needs them, and still serves produce with acks=all.
A SASL or SSL listener loads what it needs; the first consumer group loads the group
coordinator, the first transactional producer the transaction coordinator, and a node
restarted on data holding their internal topics loads them at start-up, before any
request, so the groups and transactions it leads are served. Read from the broker's own
`-X importtime` report (PYTHONPROFILEIMPORTTIME)."""
from __future__ import annotations

import importlib.util
import urllib.request
import uuid
from pathlib import Path

import trustme
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.harness import BrokerProcess, free_port, listening

from .clients import create_topic

GROUPS = "rillet.coordinator.manager"
TXNS = "rillet.txn.coordinator"
SASL = "rillet.security.sasl"
TLS = "rillet.security.tls"
# hypothesis: installed here (the dev venv) and imported by kio when importable (cli.py).
NOT_NEEDED = ("prometheus_client", "scramp", "rillet.client.admin", "rillet.admin_http",
              "rillet.metrics", GROUPS, TXNS, SASL, TLS, "hypothesis")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


def _imported(broker: BrokerProcess, since: int = 0) -> set[str]:
    """Every module the broker process imported, from its log's `import time:` lines
    (those written after byte ``since`` of the log: the log is kept across restarts)."""
    text = broker.log_path.read_bytes()[since:].decode(errors="replace")
    imported = {line.rsplit("|", 1)[1].strip() for line in text.splitlines()
                if line.startswith("import time:")}
    assert "import time:" in broker.log(), "no import report in the log: the check saw nothing"
    return imported


def _produce(bootstrap: str, topic: str, **config: object) -> None:
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  **config})
    if "transactional.id" in config:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(100):
        p.produce(topic, value=str(i).encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    if "transactional.id" in config:
        p.commit_transaction(30)
    assert p.flush(30) == 0 and errors == []


def _commit_in_group(bootstrap: str, topic: str, group: str) -> None:
    """Join ``group``, commit offset 100 of ``topic``-0 and read it back."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
        [committed] = c.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed.offset == 100
    finally:
        c.close()


def _serving(broker: BrokerProcess) -> BrokerProcess:
    broker.env["PYTHONPROFILEIMPORTTIME"] = "1"
    return broker.start()


def test_a_plaintext_node_loads_nothing_it_was_not_asked_for(tmp_path: Path) -> None:
    # The check on hypothesis means something only where it is installed (the dev venv).
    assert importlib.util.find_spec("hypothesis") is not None
    broker = _serving(BrokerProcess(tmp_path / "data"))
    try:
        topic = f"imports-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic, partitions=1)
        _produce(broker.bootstrap, topic)
    finally:
        broker.stop()
    imported = _imported(broker)
    assert "rillet.broker" in imported
    assert sorted(imported & set(NOT_NEEDED)) == []


def test_the_admin_endpoint_brings_the_metrics_with_it(tmp_path: Path) -> None:
    port = free_port()
    broker = _serving(BrokerProcess(
        tmp_path / "data", config={"admin.http.listener": f"127.0.0.1:{port}"}))
    try:
        create_topic(broker.bootstrap, "admin-imports", partitions=1)
        _produce(broker.bootstrap, "admin-imports")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            assert b"rillet_log_end_offset" in r.read()
    finally:
        broker.stop()
    imported = _imported(broker)
    assert {"prometheus_client", "rillet.metrics", "rillet.admin_http"} <= imported
    assert GROUPS not in imported   # a scrape never loads the group coordinator


def test_a_sasl_login_loads_the_exchanges_and_plain_needs_no_scram(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", config={
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    broker.config["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{broker.port}"
    _serving(broker)
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "admin", "sasl.password": "admin-secret"}
    try:
        _produce(broker.bootstrap, "sasl-imports", **login)   # auto-created
    finally:
        broker.stop()
    imported = _imported(broker)
    assert SASL in imported
    assert "scramp" not in imported and GROUPS not in imported


def test_a_tls_listener_loads_the_tls_contexts(tmp_path: Path) -> None:
    ca = trustme.CA(organization_name="rillet imports test CA")
    ca_pem, keystore = tmp_path / "ca.pem", tmp_path / "broker.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    ca.issue_cert("127.0.0.1", common_name="broker") \
        .private_key_and_cert_chain_pem.write_to_path(str(keystore))
    broker = BrokerProcess(tmp_path / "data", ready=listening,
                           config={"ssl.keystore.location": str(keystore)})
    broker.config["listeners"] = f"SSL://127.0.0.1:{broker.port}"
    _serving(broker)
    try:
        _produce(broker.bootstrap, "tls-imports", **{"security.protocol": "SSL",
                                                     "ssl.ca.location": str(ca_pem)})
    finally:
        broker.stop()
    imported = _imported(broker)
    assert TLS in imported and SASL not in imported


def test_groups_and_transactions_load_their_coordinators_on_first_use_and_at_restart(
        tmp_path: Path) -> None:
    broker = _serving(BrokerProcess(tmp_path / "data"))
    topic = "lazy-coordinators"
    try:
        create_topic(broker.bootstrap, topic, partitions=1)
        _commit_in_group(broker.bootstrap, topic, "lazy-group")
        after_group = broker.log_path.stat().st_size
        imported = _imported(broker)
        assert GROUPS in imported and TXNS not in imported
        _produce(broker.bootstrap, topic, **{"transactional.id": "lazy-txn"})
        assert TXNS in _imported(broker, since=after_group)
    finally:
        broker.stop()
    # Restarted on that data, the node loads both before any request (it leads their
    # internal topics), and serves what they hold.
    restarted_at = broker.log_path.stat().st_size
    broker.start()
    try:
        imported = _imported(broker, since=restarted_at)
        assert GROUPS in imported and TXNS in imported
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lazy-group"})
        try:
            [committed] = c.committed([TopicPartition(topic, 0)], timeout=30)
            assert committed.offset == 100
        finally:
            c.close()
    finally:
        broker.stop()
