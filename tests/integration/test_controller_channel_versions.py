"""A broker's controller channel negotiates versions per connection (issue 27): after a
dropped connection it still sends BrokerHeartbeat v1, with KIP-858's offline log dirs, to the
same controller.

The broker side is rillet's own ControllerChannel, run in this process as broker 9; the
controller is node 1 of a real one-node cluster, reached through a LinkProxy the test cuts
(tests/tcp_proxy.py) and taps to see each request's api key and version. Broker 9 registers
with two log dir ids and leads a partition in each; the link is cut and healed, so the
channel's open connection dies under its next exchange; then its heartbeats name one dir
offline, and the controller must move that dir's partition to node 1. (The channel before
this change asked a controller at v0, without the offline dirs, after any failed exchange:
the partition stayed on broker 9 until the broker restarted.)
"""
from __future__ import annotations

import asyncio
import struct
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Coroutine, Iterator, TypeVar

from rillet.client.connection import KafkaClientError
from rillet.controller.channel import ControllerChannel, Registration
from rillet.defs.broker_config import Voter
from tests.cluster import LocalCluster
from tests.integration.test_cluster import WAIT_S
from tests.integration.test_log_dir_heartbeat import _state, lead_one_partition_per_dir
from tests.polling import wait_until
from tests.tcp_proxy import LinkProxy
from tests.wire import Wire

T = TypeVar("T")
FAKE = 9
BAD, GOOD = uuid.uuid4(), uuid.uuid4()
CALL_S = 30.0   # bound on one channel call, beyond its own request timeout


class Requests:
    """The tap of the proxy: (api key, version) of every request, per proxied connection
    (label "<link>#<n>", n counting up), parsed from the bytes toward the controller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: dict[str, bytes] = defaultdict(bytes)
        self.by_connection: dict[str, list[tuple[int, int]]] = defaultdict(list)

    def tap(self, label: str, data: bytes) -> None:
        with self._lock:
            buf = self._buffers[label] + data
            while len(buf) >= 8 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                key, version = struct.unpack_from(">hh", buf, 4)
                self.by_connection[label].append((key, version))
                buf = buf[4 + size:]
            self._buffers[label] = buf

    def connections(self) -> list[list[tuple[int, int]]]:
        """Each connection's requests, in the order the connections were made."""
        with self._lock:
            return [list(self.by_connection[label]) for label in
                    sorted(self.by_connection, key=lambda lb: int(lb.rsplit("#", 1)[1]))]


class OneLeader:
    """Where the channel finds the active controller: node 1, at the proxy. (The quorum
    itself is node 1's; this process only needs its address.)"""

    def __init__(self, port: int) -> None:
        self.leader_id, self.is_leader = 1, False
        self.voters = {1: Voter(1, "127.0.0.1", port)}


@contextmanager
def _loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on its own thread: the channel's connections live on it while the
    test drives the cluster with blocking calls."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="channel-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(CALL_S)


def test_after_a_dropped_connection_offline_dirs_still_reach_the_controller(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes=1,
                           extra_config={"broker.session.timeout.ms": 120000,
                                         "offsets.topic.num.partitions": 1})
    requests = Requests()
    with cluster.start(), _loop() as loop:
        node = cluster.node(1)
        with Wire(node.bootstrap, timeout=15) as w:
            cluster_id = w.request(3, 7, {"topics": [], "allow_auto_topic_creation": False}
                                   ).cluster_id
        proxy = LinkProxy("127.0.0.1", cluster.specs[0].controller_port, name="9->1",
                          tap=requests.tap)
        leader: Any = OneLeader(proxy.port)
        channel = ControllerChannel(FAKE, cluster_id, leader, None, None,  # type: ignore[arg-type]
                                    None, 10.0)
        try:
            epoch = _run(loop, channel.register_broker(Registration(
                FAKE, uuid.uuid4(), (("PLAINTEXT", "127.0.0.1", 1, "PLAINTEXT"),), None,
                (BAD, GOOD))))

            def heartbeat(offline: frozenset[uuid.UUID] = frozenset()) -> bool:
                """Whether broker 9 is unfenced after one heartbeat."""
                return not _run(loop, channel.broker_heartbeat(
                    FAKE, epoch, 1 << 40, False, offline)).fenced
            wait_until(heartbeat, WAIT_S, "broker 9 unfenced")
            lead_one_partition_per_dir(node.bootstrap,
                                       f"127.0.0.1:{cluster.specs[0].controller_port}", epoch,
                                       {"bad": BAD, "good": GOOD})
            assert len(requests.connections()) == 1
            assert requests.connections()[0][:3] == [(18, 0), (62, 2), (63, 1)]

            # The link drops: the channel's open connection is gone under it.
            proxy.cut("refuse")
            proxy.heal()
            failed = 0

            def reported() -> bool:
                nonlocal failed
                try:
                    heartbeat(frozenset({BAD}))
                except KafkaClientError:
                    failed += 1
                return _state(node.bootstrap, "bad") == (1, (1,))
            wait_until(reported, WAIT_S, "`bad` led by node 1, broker 9 out of its ISR")
            assert failed >= 1, "the cut failed no exchange: the test proved nothing"
            assert _state(node.bootstrap, "good")[0] == FAKE
            # The same controller, asked on a new connection: ApiVersions, then v1.
            after = requests.connections()[1:]
            assert after and after[-1][:2] == [(18, 0), (63, 1)], requests.connections()
            assert all((63, 0) not in c for c in requests.connections())
        finally:
            _run(loop, channel.close())
            proxy.close()
