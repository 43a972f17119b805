"""The fault harness itself, against single-node brokers: proxies cut and heal, pause stops a
broker answering, kill -9 keeps data, close() leaves nothing running, chaos restores all.

Today a node ignores controller.quorum.voters, so a LocalCluster is three independent
brokers; these tests check the mechanics the cluster tests will stand on, not a quorum.
"""
from __future__ import annotations

import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import Producer

from rillet.local_cluster import is_listening
from rillet.protocol.codec import decode_response
from tests.chaos import LINK_FAULTS, ChaosPlan, run_chaos
from tests.cluster import LocalCluster
from tests.harness import BrokerProcess
from tests.polling import wait_until
from tests.node_gate import LinkTable, NodeGate, node_address
from tests.tcp_proxy import LinkProxy, recv_exact
from tests.wire import Wire

from .clients import confluent_consume, create_topic

FAST = 2.0  # a refused connection fails well within this; a blackholed one never does


def _api_versions_ok(wire: Wire) -> bool:
    return wire.request(18, 0, {}).error_code == 0


@pytest.fixture
def link(broker: BrokerProcess) -> Iterator[LinkProxy]:
    """A link proxy in front of a single broker's client port."""
    proxy = LinkProxy(broker.host, broker.port)
    try:
        yield proxy
    finally:
        proxy.close()
        assert proxy.threads() == []


@pytest.fixture
def cluster(cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    return cluster_factory(nodes=3)


def test_refuse_drops_open_connections_and_new_ones_until_healed(link: LinkProxy) -> None:
    with Wire(link.bootstrap, timeout=10) as wire:
        assert _api_versions_ok(wire)
        link.cut("refuse")
        started = time.monotonic()
        with pytest.raises(OSError):  # ConnectionError and socket errors are OSErrors
            wire.request(18, 0, {})
        assert time.monotonic() - started < FAST
    started = time.monotonic()
    with pytest.raises(OSError), Wire(link.bootstrap, timeout=10) as wire:
        wire.request(18, 0, {})
    assert time.monotonic() - started < FAST
    link.heal()
    with Wire(link.bootstrap, timeout=10) as wire:
        assert _api_versions_ok(wire)


def _send_into_blackhole(link: LinkProxy, held: Wire) -> None:
    """Blackhole the link under a working connection, then send a request that is held."""
    assert _api_versions_ok(held)
    link.cut("blackhole")
    held.sock.settimeout(0.5)
    with pytest.raises(socket.timeout):  # sent, held by the proxy, never answered
        held.request(18, 0, {})


def test_blackhole_holds_bytes_until_healed_then_delivers_them(link: LinkProxy) -> None:
    with Wire(link.bootstrap, timeout=10) as held:
        _send_into_blackhole(link, held)
        # A new connection is accepted but goes nowhere either.
        with pytest.raises(socket.timeout), Wire(link.bootstrap, timeout=0.5) as fresh:
            fresh.request(18, 0, {})
        link.heal()
        # Like TCP through a healed partition: the held request goes through, late.
        held.sock.settimeout(10)
        correlation, response = decode_response(18, 0, held.recv_frame())
        assert correlation == held.correlation and response.error_code == 0
        assert _api_versions_ok(held)
    with Wire(link.bootstrap, timeout=10) as wire:
        assert _api_versions_ok(wire)


def test_a_refuse_cut_drops_a_blackholed_connection(link: LinkProxy) -> None:
    with Wire(link.bootstrap, timeout=10) as held:
        _send_into_blackhole(link, held)
        link.cut("refuse")
        held.sock.settimeout(FAST)
        with pytest.raises(ConnectionError):
            held.recv_frame()
    link.heal()
    with Wire(link.bootstrap, timeout=10) as wire:
        assert _api_versions_ok(wire)


def test_pause_stops_a_broker_answering_and_resume_brings_it_back(broker: BrokerProcess) -> None:
    assert broker.answers()
    broker.pause()
    try:
        assert not broker.answers(timeout=0.5)
        assert broker.alive() and is_listening(broker.host, broker.port)  # not a crash
    finally:
        broker.resume()
    wait_until(broker.answers, 10, "the resumed broker to answer")


def test_stopping_a_paused_broker_is_still_a_clean_shutdown(broker: BrokerProcess) -> None:
    broker.pause()
    assert broker.stop(timeout=20) == 0
    assert not broker.paused


def test_kill_minus_nine_and_restart_keeps_acknowledged_data(cluster: LocalCluster) -> None:
    node = cluster.node(2)
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    create_topic(node.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, key=str(i % 2).encode(), value=str(i).encode())
    assert producer.flush(20) == 0
    cluster.kill_node(2)
    assert not node.alive() and node.proc is not None and node.proc.returncode == -9
    cluster.start_node(2)
    got = confluent_consume(node.bootstrap, topic, 2, 200)
    assert sorted(int(m.value) for m in got) == list(range(200))


def test_links_lead_to_each_voters_controller_listener(tmp_path: Path) -> None:
    # Not started: a stand-in listens on node 2's CONTROLLER port, so the test holds
    # whether or not a node opens that listener itself.
    with LocalCluster(tmp_path, nodes=3, addressed=False) as cluster:
        spec = {s.node_id: s for s in cluster.specs}
        for a in (1, 2, 3):
            voters = dict(v.split("@") for v in
                          cluster.node(a).config["controller.quorum.voters"].split(","))
            for b in (1, 2, 3):
                expected = (spec[b].controller_address if a == b
                            else cluster.link(a, b).bootstrap)
                assert voters[str(b)] == expected
        with socket.create_server(("127.0.0.1", spec[2].controller_port)) as stand_in:
            stand_in.settimeout(5)
            with socket.create_connection(("127.0.0.1", cluster.link(1, 2).port), timeout=5):
                conn, _ = stand_in.accept()
                conn.close()


def test_cut_isolate_and_heal_touch_exactly_the_named_links(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, nodes=3) as cluster:
        cluster.cut(1, 2)
        assert cluster.cut_links() == [(1, 2), (2, 1)]
        cluster.isolate(3, mode="blackhole")
        assert cluster.cut_links() == [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]
        assert cluster.link(1, 3).mode.value == "blackhole"
        cluster.heal(1, 2)
        assert cluster.cut_links() == [(1, 3), (2, 3), (3, 1), (3, 2)]
        cluster.heal_all()
        assert cluster.cut_links() == []
        with pytest.raises(KeyError):
            cluster.cut(1, 9)


def test_an_unproxied_cluster_has_no_links_to_cut(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, nodes=2, proxied=False) as cluster:
        assert cluster.links() == {}
        assert "@127.0.0.1:" in cluster.node(1).config["controller.quorum.voters"]
        with pytest.raises(RuntimeError):
            cluster.cut(1, 2)


def test_close_ends_every_process_and_thread_even_mid_fault(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    cluster = LocalCluster(tmp_path, nodes=3, addressed=False).start()
    cluster.pause_node(1)
    cluster.cut(2, 3, mode="blackhole")
    # A connection waiting on the blackholed link holds a proxy thread.
    waiting = socket.create_connection(("127.0.0.1", cluster.link(2, 3).port), timeout=5)
    started = time.monotonic()
    try:
        cluster.close()
    finally:
        waiting.close()
    assert time.monotonic() - started < 10
    assert all(not cluster.node(i).alive() for i in cluster.node_ids)
    assert set(threading.enumerate()) - before == set()
    cluster.close()  # twice is fine


def test_restore_all_heals_resumes_and_restarts_everything(cluster: LocalCluster) -> None:
    cluster.kill_node(1)
    cluster.pause_node(2)
    cluster.stop_node(3)
    cluster.isolate(1)
    cluster.restore_all(timeout=60)
    assert cluster.cut_links() == []
    assert all(cluster.node(i).answers() for i in cluster.node_ids)


def test_a_short_chaos_run_ends_with_everything_restored(cluster: LocalCluster) -> None:
    answered: list[int] = []

    def workload(stop: threading.Event) -> None:
        while not stop.wait(0.1):  # some node keeps answering, whatever the fault
            answered.extend(i for i in cluster.node_ids if cluster.node(i).answers(0.3))

    plan = ChaosPlan(cycles=5, seconds=30, seed=20261123, hold=(0.2, 0.5), settle=(0.1, 0.2))
    events = run_chaos(cluster, plan, workload=workload)
    kinds = {e.fault.kind for e in events if e.fault}
    assert len([e for e in events if e.action == "inject"]) == 5, events
    assert kinds & {"kill", "stop", "pause"} and kinds & set(LINK_FAULTS), kinds
    assert events[-1].action == "restore" and cluster.cut_links() == []
    assert all(cluster.node(i).answers() for i in cluster.node_ids), cluster.logs()
    assert answered


# -- per-node gates (addressed clusters): the mechanics, against an echo listener ---------------


@pytest.fixture
def echo_gate() -> Iterator[NodeGate]:
    """Node 1's gate in front of an echo listener on node 1's address; nodes 2 and 3 known."""
    table = LinkTable([1, 2, 3])
    server = socket.create_server((node_address(1), 0))
    stop = threading.Event()

    def echo() -> None:
        server.settimeout(0.2)
        conns = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conns.append(conn)
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()
        for conn in conns:
            conn.close()

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    gate = NodeGate(1, server.getsockname()[1], table)
    try:
        yield gate
    finally:
        gate.close()
        stop.set()
        thread.join(5)
        server.close()
        assert gate.threads() == []


def _echo(conn: socket.socket) -> None:
    try:
        while data := conn.recv(4096):
            conn.sendall(data)
    except OSError:
        pass


def _from(node_id: int | None, gate: NodeGate) -> socket.socket:
    """A connection to the gate from node `node_id`'s address (None: a client's)."""
    source = ("127.0.0.1", 0) if node_id is None else (node_address(node_id), 0)
    return socket.create_connection((gate.host, gate.port), timeout=5, source_address=source)


def _round_trip(sock: socket.socket, data: bytes = b"ping", timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    sock.sendall(data)
    return recv_exact(sock, len(data))


def test_a_gate_cuts_one_way_per_peer_and_never_a_client(echo_gate: NodeGate) -> None:
    table: LinkTable = echo_gate.table
    from_2, from_3, client = _from(2, echo_gate), _from(3, echo_gate), _from(None, echo_gate)
    with from_2, from_3, client:
        assert _round_trip(from_2) == b"ping" and _round_trip(from_3) == b"ping"
        # 1 -> 2 held: node 2's request reaches node 1, the answer does not come back.
        table.link(1, 2).cut("blackhole")
        with pytest.raises(socket.timeout):
            _round_trip(from_2, timeout=0.5)
        assert _round_trip(from_3) == b"ping" and _round_trip(client) == b"ping"
        assert table.cut() == [(1, 2)]
        table.link(1, 2).heal()
        from_2.settimeout(5)   # the held answer, however loaded the machine
        assert recv_exact(from_2, 4) == b"ping"   # held, then delivered
        # 2 -> 1 refused: node 2's connection is reset, the others carry on.
        table.link(2, 1).cut("refuse")
        with pytest.raises(OSError):
            _round_trip(from_2, timeout=FAST)
        assert _round_trip(from_3) == b"ping" and _round_trip(client) == b"ping"
        table.link(2, 1).heal()
    with _from(2, echo_gate) as again:
        assert _round_trip(again) == b"ping"


def test_a_slowed_link_delays_each_chunk_that_way_only(echo_gate: NodeGate) -> None:
    table: LinkTable = echo_gate.table
    with _from(2, echo_gate) as from_2, _from(None, echo_gate) as client:
        # A delay far above a loopback round trip on a loaded machine, so the client's
        # undelayed one is told apart from it without a tight bound.
        table.link(2, 1).slow(1.5)
        started = time.monotonic()
        assert _round_trip(from_2) == b"ping"
        assert time.monotonic() - started >= 1.5
        started = time.monotonic()
        assert _round_trip(client) == b"ping"
        assert time.monotonic() - started < 1.5
        table.link(2, 1).heal()
        assert table.link(2, 1).delay == 0.0


def test_an_addressed_cluster_routes_every_node_link_through_gates(tmp_path: Path) -> None:
    # Not started: the settings and the gates are what is checked.
    with LocalCluster(tmp_path, nodes=3, addressed=True) as cluster:
        for node_id in cluster.node_ids:
            config = cluster.node(node_id).config
            host = node_address(node_id)
            assert config["outbound.source.address"] == host
            assert config["listeners"].startswith(f"PLAINTEXT://{host}:")
            gate = cluster.node(node_id).bootstrap
            assert config["advertised.listeners"] == f"PLAINTEXT://{gate}"
            voters = dict(v.split("@") for v in config["controller.quorum.voters"].split(","))
            assert all(voters[str(o)].startswith(node_address(o) + ":") for o in (1, 2, 3))
            assert voters[str(node_id)] == cluster.specs[node_id - 1].controller_address
        assert len(cluster.links()) == 6
        cluster.cut_one_way(1, 2)
        assert cluster.cut_links() == [(1, 2)]
        cluster.heal(1, 2)
        assert cluster.cut_links() == []
