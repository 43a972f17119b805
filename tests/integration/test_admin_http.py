"""The broker's HTTP admin endpoint (admin.http.listener): /healthz, /readyz, /metrics.

Real broker processes, real HTTP over loopback (urllib and raw sockets), real Kafka clients
(kafka-python) making the traffic the metrics count. A single node for the endpoint's
contract and the traffic metrics; one three-node cluster, shared by the module, for
readiness before the quorum forms, under-replication after a follower dies and a node cut
off from the controller.
"""
from __future__ import annotations

import json
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from rillet.local_cluster import serve_command
from tests.cluster import LocalCluster
from tests.harness import BrokerProcess, free_port, free_ports
from tests.integration.test_cluster import RACKS, _address, _leader, _partitions
from tests.integration.test_replication import REPLICATION, _replicated_topic
from tests.polling import read_until, wait_until

WAIT_S = 60.0


# -- talking to the endpoint -------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def get(address: str, path: str, method: str = "GET", timeout: float = 10) -> Answer:
    request = urllib.request.Request(f"http://{address}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return Answer(r.status, r.read(), dict(r.headers))
    except urllib.error.HTTPError as e:
        return Answer(e.code, e.read(), dict(e.headers))


def try_get(address: str, path: str) -> Answer | None:
    """None while nothing answers (not listening yet, a paused process)."""
    try:
        return get(address, path, timeout=3)
    except OSError:
        return None


def samples(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, parsed by prometheus-client's own parser."""
    answer = get(address, "/metrics")
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(answer.body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(address: str, name: str, **labels: str) -> float | None:
    return samples(address).get((name, tuple(sorted(labels.items()))))


def raw_exchange(address: str, data: bytes, timeout: float = 10) -> bytes:
    """Send `data`, half-close, read until the server closes: what it answered (maybe b"")."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server gave up on us first
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass  # closed with our bytes unread: a reset may follow (or replace) the answer
        return b"".join(chunks)


# -- a single node ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    admin = f"127.0.0.1:{free_port()}"
    b = BrokerProcess(tmp_path_factory.mktemp("admin-single") / "data",
                      config={"admin.http.listener": admin}).start()
    try:
        yield b, admin
    finally:
        alive = b.alive()
        b.stop()
        assert alive, "the broker died:\n" + b.log()


def test_single_node_is_healthy_and_ready(node: tuple[BrokerProcess, str]) -> None:
    _, admin = node
    health = get(admin, "/healthz")
    assert (health.status, health.body) == (200, b"ok")
    # Ready once unfenced; the broker serves clients only after that, so at once here.
    ready = get(admin, "/readyz")
    assert ready.status == 200 and ready.json() == {"ready": True}
    assert value(admin, "rillet_broker_state", state="unfenced") == 1


def test_metrics_count_real_client_traffic(node: tuple[BrokerProcess, str]) -> None:
    broker, admin = node
    topic, group, count, size = "admin-metrics", "admin-lagging-group", 100, 300
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5)
    for i in range(count):
        producer.send(topic, value=(b"%05d" % i) * (size // 5))
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    seen = 0
    for _ in consumer:
        seen += 1
        if seen == count:
            break
    # Commit behind the end: 40 of 100 consumed as far as the group is concerned.
    consumer.commit({tp: OffsetAndMetadata(40, "", -1)})
    consumer.close()
    assert seen == count

    lag = ("rillet_group_consumer_lag", (("group", group), ("partition", "0"),
                                          ("topic", topic)))
    s = read_until(lambda: samples(admin), lambda s: s.get(lag) == count - 40, WAIT_S)
    assert s.get(lag) == count - 40
    produce = [v for (name, labels), v in s.items()
               if name == "rillet_server_requests_total" and ("api", "Produce") in labels]
    fetch = [v for (name, labels), v in s.items()
             if name == "rillet_server_requests_total" and ("api", "Fetch") in labels]
    assert sum(produce) >= 1 and sum(fetch) >= 1, s
    assert s[("rillet_server_request_duration_seconds_count", (("api", "Produce"),))] >= 1
    # Batches carry headers beyond the values: at least the values' bytes went in and out.
    assert s[("rillet_server_bytes_in_total", ())] >= count * size
    assert s[("rillet_server_bytes_out_total", ())] >= count * size
    assert s[("rillet_log_size_bytes", (("partition", "0"), ("topic", topic)))] >= count * size
    assert s[("rillet_log_end_offset", (("partition", "0"), ("topic", topic)))] == count
    assert s[("rillet_replica_under_replicated_partitions", ())] == 0
    assert s[("rillet_replica_leader_count", ())] >= 1


def test_unknown_paths_and_methods(node: tuple[BrokerProcess, str]) -> None:
    _, admin = node
    assert get(admin, "/").status == 404
    assert get(admin, "/metricsx").status == 404
    for method in ("POST", "PUT", "DELETE"):
        answer = get(admin, "/readyz", method=method)
        assert answer.status == 405 and answer.headers.get("Allow") == "GET"


@pytest.mark.parametrize("garbage", [
    b"\x00\x01\x02\xff\xfe garbage \r\n\r\n",
    b"\x00\x00\x00\x10\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04test",   # a Kafka request
    b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n",  # over the limit
    b"GET /healthz",                                                     # cut short
    bytes(range(256)) * 64,
])
def test_garbage_closes_one_connection_and_harms_nothing(node: tuple[BrokerProcess, str],
                                                         garbage: bytes) -> None:
    broker, admin = node
    answer = raw_exchange(admin, garbage)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert get(admin, "/healthz").status == 200
    assert broker.answers(timeout=5), broker.log()


def test_a_silent_connection_does_not_block_others(node: tuple[BrokerProcess, str]) -> None:
    broker, admin = node
    host, port = admin.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as idle:
        idle.sendall(b"GET /healthz HTTP/1.1\r\n")   # and nothing more
        assert get(admin, "/readyz").status == 200
        assert broker.answers(timeout=5)


def _serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    config = {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
              "log.dirs": str(tmp_path / "data"), **settings}
    return subprocess.run(serve_command(config), capture_output=True, text=True, timeout=60)


def test_a_bad_admin_listener_stops_start_up(tmp_path: Path) -> None:
    result = _serve(tmp_path, **{"admin.http.listener": "9404"})
    assert result.returncode == 2
    assert "admin.http.listener must be HOST:PORT" in result.stderr


def test_a_taken_admin_port_stops_start_up(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve(tmp_path, **{"admin.http.listener": f"127.0.0.1:{port}"})
    assert result.returncode == 2
    assert f"listener admin.http cannot listen on 127.0.0.1:{port}" in result.stderr


# -- three nodes ------------------------------------------------------------------------

@dataclass
class StagedCluster:
    cluster: LocalCluster
    admin: dict[int, str]                 # node id -> admin HTTP address
    alone_health: Answer | None = None    # node 1's answers while it was the only node up
    alone_ready: Answer | None = None


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StagedCluster]:
    """A three-node cluster started one node first: what that node's endpoint said before
    a quorum could form is kept for the test; then the rest join."""
    cluster = LocalCluster(tmp_path_factory.mktemp("admin-cluster"), nodes=3, racks=RACKS,
                           extra_config=REPLICATION)
    ports = free_ports(len(cluster.node_ids))
    admin = {n: f"127.0.0.1:{p}" for n, p in zip(cluster.node_ids, ports)}
    for n in cluster.node_ids:
        cluster.node(n).config["admin.http.listener"] = admin[n]
    s = StagedCluster(cluster, admin)
    try:
        cluster.start_node(1, wait=False)
        s.alone_health = read_until(lambda: try_get(admin[1], "/healthz"),
                                    lambda a: a is not None, WAIT_S)
        s.alone_ready = try_get(admin[1], "/readyz")
        for n in cluster.node_ids[1:]:
            cluster.start_node(n, wait=False)
        cluster.wait_ready()
        yield s
    finally:
        cluster.close()


def _ready(address: str) -> bool:
    answer = try_get(address, "/readyz")
    return answer is not None and answer.status == 200


def test_not_ready_until_the_quorum_forms(staged: StagedCluster) -> None:
    assert staged.alone_health is not None and staged.alone_health.status == 200
    alone = staged.alone_ready
    assert alone is not None and alone.status == 503, alone
    assert alone.json()["ready"] is False and alone.json()["reason"] in (
        "starting", "not_registered", "fenced"), alone.json()
    for n, address in staged.admin.items():
        wait_until(lambda: _ready(address), WAIT_S, f"node {n} ready")
        assert get(address, "/readyz").json() == {"ready": True}


def test_under_replicated_partitions_after_a_follower_dies(staged: StagedCluster) -> None:
    cluster, admin = staged.cluster, staged.admin
    topic = "admin-urp"
    _replicated_topic(cluster, topic, 1)
    leader = read_until(lambda: _partitions(cluster.bootstrap, topic).get(0),
                        lambda p: p is not None and p[0] in cluster.node_ids and len(p[2]) == 3,
                        WAIT_S)
    assert leader is not None, cluster.logs()
    leader_id, replicas, _ = leader
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(20):
        producer.send(topic, value=b"urp-%d" % i).get(timeout=30)
    producer.close()
    urp = "rillet_replica_under_replicated_partitions"
    wait_until(lambda: value(admin[leader_id], urp) == 0, WAIT_S, "full ISR on the leader")
    shrinks = value(admin[leader_id], "rillet_replica_isr_shrinks_total") or 0
    controller = _leader(cluster)
    follower = next((r for r in replicas if r not in (leader_id, controller)),
                    next(r for r in replicas if r != leader_id))
    cluster.kill_node(follower)
    try:
        # The leader drops it from the ISR after replica.lag.time.max.ms (3 s here).
        wait_until(lambda: (value(admin[leader_id], urp) or 0) >= 1, WAIT_S,
                   f"node {leader_id} to count {topic}-0 under-replicated")
        assert value(admin[leader_id], "rillet_replica_isr_shrinks_total") > shrinks
    finally:
        cluster.start_node(follower)
    wait_until(lambda: value(admin[leader_id], urp) == 0, WAIT_S,
               f"{topic}-0 back to a full ISR on node {leader_id}")
    assert value(admin[leader_id], "rillet_replica_isr_expands_total") >= 1
    wait_until(lambda: _ready(admin[follower]), WAIT_S, f"node {follower} ready again")


def test_a_node_cut_off_from_the_controller_majority_is_not_ready(
        staged: StagedCluster) -> None:
    cluster, admin = staged.cluster, staged.admin
    controller = _leader(cluster)
    others = [n for n in cluster.node_ids if n != controller]
    kept, paused = others[0], [controller, others[1]]
    wait_until(lambda: _ready(admin[kept]), WAIT_S, f"node {kept} ready")
    for n in paused:
        cluster.pause_node(n)
    try:
        # Heartbeats go unanswered; after broker.session.timeout.ms (4 s) the controller
        # would have fenced this node, so it stops calling itself ready.
        answer = read_until(lambda: try_get(admin[kept], "/readyz"),
                            lambda a: a is not None and a.status == 503, WAIT_S)
        assert answer is not None and answer.status == 503, answer
        assert answer.json() == {"ready": False, "reason": "controller_unreachable"}
        assert get(admin[kept], "/healthz").status == 200   # alive, just not ready
    finally:
        for n in paused:
            cluster.resume_node(n)
    for n, address in admin.items():
        wait_until(lambda: _ready(address), WAIT_S, f"node {n} ready after the pause")
