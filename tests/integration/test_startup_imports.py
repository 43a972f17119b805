"""What a broker loads at start-up follows its config (issue 30): a plaintext node without the
admin HTTP endpoint imports neither the Prometheus client (nothing could scrape it) nor the
SCRAM library (no SASL listener), nor the admin client, and still serves produce with
acks=all. Read from the broker's own `-X importtime` report (PYTHONPROFILEIMPORTTIME)."""
from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import Producer

from tests.harness import BrokerProcess, free_port

from .clients import create_topic

NOT_NEEDED = ("prometheus_client", "scramp", "rillet.client.admin")


def _imported(broker: BrokerProcess) -> set[str]:
    """Every module the broker process imported, from its log's `import time:` lines."""
    lines = broker.log_path.read_text(errors="replace").splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


def _produce_acks_all(bootstrap: str) -> None:
    topic = f"imports-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(100):
        p.produce(topic, value=str(i).encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []


def _imports_of_a_serving_node(broker: BrokerProcess) -> set[str]:
    """Start `broker` with Python's import report on, serve an acks=all produce, stop it:
    the modules it imported."""
    broker.env["PYTHONPROFILEIMPORTTIME"] = "1"
    broker.start()
    try:
        _produce_acks_all(broker.bootstrap)
    finally:
        broker.stop()
    imported = _imported(broker)
    assert "rillet.broker" in imported, "no import report in the log: the check saw nothing"
    return imported


def test_a_plaintext_node_without_the_admin_endpoint_loads_no_metrics_or_scram(
        tmp_path: Path) -> None:
    imported = _imports_of_a_serving_node(BrokerProcess(tmp_path / "data"))
    assert sorted(imported & set(NOT_NEEDED)) == []


def test_the_admin_endpoint_brings_the_metrics_with_it(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data",
                           config={"admin.http.listener": f"127.0.0.1:{free_port()}"})
    assert "prometheus_client" in _imports_of_a_serving_node(broker)
