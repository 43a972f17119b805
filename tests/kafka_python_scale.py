"""The kafka-python stall (issue 27) reproduced outside Kubernetes: an idempotent acks=all
kafka-python 3.0.12 producer through 3 -> 5 -> 3 brokers on local processes.

    python -m tests.kafka_python_scale DIR [--roll] [--hang] [--dns nxdomain|hang] [--log FILE]

Nodes 1-3 (the voters) start; the producer sends keyed records to a 6-partition topic (RF=3,
min.insync.replicas=2) with the settings of the e2e stream that stalled (retries unbounded,
delivery.timeout.ms 300 s, request.timeout.ms 30 s, linger.ms 5). Nodes 4 and 5 join, every
partition is reassigned across the five; with --roll each broker is then restarted in turn
with its partition logs wiped (the emptyDir roll of the e2e test), waiting for a full ISR
each time; the partitions are reassigned back onto 1-3, nodes 4 and 5 stopped (--hang:
SIGSTOPped, so a connection to them opens and never answers, as a deleted pod's address may
behave) and unregistered once fenced. Progress (sent, acknowledged) is printed per step, then flush(60 s) must end.
With --dns, brokers advertise names (bN.rillet.test) that this process and the brokers
resolve through tests/fake_dns.py, as pods' DNS names; once nodes 4 and 5 are stopped their
names answer NXDOMAIN (--dns nxdomain) or hang 5 s and fail (--dns hang), as a deleted
pod's name does. --log writes kafka-python's DEBUG log there.
Bounded: every wait has a deadline; the cluster is killed at the end. Exit code 1 on a stall.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from kafka import KafkaProducer

from rillet.client.admin import AdminClient
from tests import fake_dns
from tests.cluster import LocalCluster

TOPIC, PARTITIONS = "stream", 6
CONFIG = {"broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 500,
          "replica.lag.time.max.ms": 3000, "default.replication.factor": 3,
          "min.insync.replicas": 2, "offsets.topic.num.partitions": 1}
STEP_S = 120.0


class Stream:
    """The producer in a thread, counting what was sent and acknowledged."""

    def __init__(self, bootstrap: list[str] | str, topic: str = TOPIC) -> None:
        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                      enable_idempotence=True, retries=2**31 - 1,
                                      delivery_timeout_ms=300000, request_timeout_ms=30000,
                                      linger_ms=5)
        self.sent = self.acked = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _acked(self, _: Any) -> None:
        self.acked += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.send(self.topic, key=b"%d" % (self.sent % 64), value=b"%d" % self.sent) \
                .add_callback(self._acked).add_errback(lambda e: self.errors.append(repr(e)))
            self.sent += 1
            time.sleep(0.002)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def progress(self, label: str, seconds: float = 5.0) -> int:
        """Acknowledgements during the next `seconds`, printed."""
        before = self.acked
        time.sleep(seconds)
        print(f"{label}: sent {self.sent}, acked {self.acked} (+{self.acked - before} in "
              f"{seconds:.0f} s), errors {len(self.errors)}", flush=True)
        return self.acked - before


def _admin(cluster: LocalCluster, call: Callable[[AdminClient], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with AdminClient(cluster.bootstrap, timeout=15) as admin:
            return await call(admin)
    return asyncio.run(run())


def _until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + STEP_S
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {STEP_S:.0f} s")
        time.sleep(0.5)


def _move(cluster: LocalCluster, nodes: list[int]) -> None:
    moves = {(TOPIC, p): [nodes[(p + k) % len(nodes)] for k in range(3)]
             for p in range(PARTITIONS)}
    _admin(cluster, lambda a: a.alter_partition_reassignments(moves))
    _until(f"reassignment onto {nodes}",
           lambda: not _admin(cluster, lambda a: a.list_partition_reassignments()))


def _roll_empty(cluster: LocalCluster, stream: Stream, node_id: int) -> None:
    """Restart node_id with its partition logs gone (its metadata log kept)."""
    cluster.stop_node(node_id)
    for child in cluster.node(node_id).data_dir.iterdir():
        if child.is_dir() and child.name != "__metadata":
            shutil.rmtree(child)
    cluster.start_node(node_id)
    _until(f"a full ISR after rolling {node_id}",
           lambda: not _admin(cluster, lambda a: a.under_replicated()))
    stream.progress(f"rolled {node_id}", 2)


def _unregister(cluster: LocalCluster, node_id: int) -> bool:
    try:
        _admin(cluster, lambda a: a.unregister_broker(node_id))
        return True
    except Exception:   # still fenced-in for a moment after a SIGSTOP
        return False


def _name(node_id: int) -> str:
    return f"b{node_id}{fake_dns.SUFFIX}"


def _advertise_names(cluster: LocalCluster, map_file: Path) -> dict[str, str]:
    """Every node advertises bN.rillet.test and resolves through `map_file`; the answers."""
    answers = {_name(n): cluster.node(n).host for n in cluster.node_ids}
    fake_dns.write_map(map_file, answers)
    for node_id in cluster.node_ids:
        node = cluster.node(node_id)
        node.config["advertised.listeners"] = f"PLAINTEXT://{_name(node_id)}:{node.port}"
        node.env.update(fake_dns.env(map_file))
    os.environ[fake_dns.MAP_ENV] = str(map_file)
    fake_dns.install()
    return answers


def run(root: Path, roll: bool, hang: bool, dns: str | None = None) -> bool:
    """True when the producer kept going and its flush ended."""
    with LocalCluster(root, nodes=5, voter_count=3, extra_config=CONFIG) as cluster:
        root.mkdir(parents=True, exist_ok=True)
        map_file = root / "dns.json"
        answers = _advertise_names(cluster, map_file) if dns else {}
        for node_id in (1, 2, 3):
            cluster.start_node(node_id, wait=False)
        cluster.wait_ready(node_ids=(1, 2, 3))
        _admin(cluster, lambda a: a.create_topic(TOPIC, PARTITIONS, 3))
        stream = Stream([f"{_name(n)}:{cluster.node(n).port}" if dns
                         else cluster.node(n).bootstrap for n in (1, 2, 3)])
        stream.start()
        try:
            stream.progress("3 brokers")
            for node_id in (4, 5):
                cluster.start_node(node_id, wait=False)
            cluster.wait_ready(node_ids=(4, 5))
            _move(cluster, [1, 2, 3, 4, 5])
            stream.progress("spread over 5")
            for node_id in (1, 2, 3, 4, 5) if roll else ():
                _roll_empty(cluster, stream, node_id)
            _move(cluster, [1, 2, 3])
            for node_id in (4, 5):
                if hang:
                    cluster.pause_node(node_id)
                else:
                    cluster.stop_node(node_id)
                if dns:
                    answers[_name(node_id)] = "nxdomain" if dns == "nxdomain" else "hang:5"
                    fake_dns.write_map(map_file, answers)
            for node_id in (4, 5):
                _until(f"node {node_id} unregistered",
                       lambda n=node_id: _unregister(cluster, n))
            moving = [stream.progress(f"4, 5 gone +{5 * i} s") for i in range(4)]
        finally:
            stream.stop()
        started = time.monotonic()
        try:
            stream.producer.flush(timeout=60)
        except Exception as exc:
            print(f"STALL: flush did not end ({exc!r}); acked {stream.acked} of {stream.sent}")
            return False
        finally:
            stream.producer.close(timeout=5)
        print(f"flush ended in {time.monotonic() - started:.1f} s; acked {stream.acked} of "
              f"{stream.sent}; errors {stream.errors[:5]}")
        return all(moving) and stream.acked == stream.sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kafka_python_scale")
    parser.add_argument("root", type=Path, help="where the nodes keep data (a new dir)")
    parser.add_argument("--roll", action="store_true",
                        help="restart every broker with empty logs while there are five")
    parser.add_argument("--hang", action="store_true",
                        help="SIGSTOP nodes 4 and 5 instead of stopping them")
    parser.add_argument("--dns", choices=("nxdomain", "hang"),
                        help="advertise names; the removed brokers' names fail this way")
    parser.add_argument("--log", type=Path, help="kafka-python's DEBUG log, to this file")
    args = parser.parse_args(argv)
    if args.log:
        handler = logging.FileHandler(args.log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s "
                                               "%(levelname)s %(message)s"))
        logging.getLogger("kafka").addHandler(handler)
        logging.getLogger("kafka").setLevel(logging.DEBUG)
    return 0 if run(args.root, args.roll, args.hang, args.dns) else 1


if __name__ == "__main__":
    sys.exit(main())
