"""ISR re-expansion after kill -9 of a broker: AlterPartition requests and time, per size.

    .venv/bin/python bench/isr_expansion.py [--partitions 300,1000] [--timeout 300]
                                            [--set key=value ...]

For each partition count N: a fresh local 3-node cluster (controller links proxied and
tapped), one topic of N partitions, RF=3, placed so the active controller leads none of
them and every ISR change travels the wire to it (the tap counts AlterPartition frames
exactly; a leader that is also the controller would call it in-process). A record goes
to every partition (acks=1); one non-controller broker is killed -9; once every ISR has dropped it,
it is started again and the clock runs until every ISR is full (as Metadata reports it).
Printed per N: AlterPartition requests the controller received during the re-expansion,
the seconds to full ISRs, and the healthy brokers the controller fenced meanwhile (its
"broker N fenced" log lines). Timeouts are Kafka's defaults unless --set.

Only public behaviour is used (Metadata, the tap, the brokers' logs), so the same script
measures an older checkout: run it with PYTHONPATH=<that checkout>/broker_image:<that
checkout> to compare.
"""
from __future__ import annotations

import argparse
import re
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient as KafkaAdmin  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from tests.cluster import LocalCluster, describe_quorum  # noqa: E402

ALTER_PARTITION = 56
POLL_S = 0.2
TOPIC = "expand"


class RequestCounter:
    """A LinkProxy tap counting request frames by API key, per connection (frames never
    span connections); keeps only the unfinished tail of each stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tails: dict[str, bytearray] = {}
        self.counts: dict[int, int] = {}

    def __call__(self, connection: str, data: bytes) -> None:
        with self._lock:
            tail = self._tails.setdefault(connection, bytearray())
            tail.extend(data)
            while len(tail) >= 6:
                size = struct.unpack_from(">i", tail, 0)[0]
                if len(tail) < 4 + size:
                    break
                key = struct.unpack_from(">h", tail, 4)[0]
                self.counts[key] = self.counts.get(key, 0) + 1
                del tail[:4 + size]

    def count(self, key: int) -> int:
        with self._lock:
            return self.counts.get(key, 0)


_ADMINS: dict[str, KafkaAdmin] = {}


def _isrs(bootstrap: str) -> dict[int, tuple[int, ...]]:
    admin = _ADMINS.get(bootstrap)
    if admin is None:
        admin = _ADMINS[bootstrap] = KafkaAdmin({"bootstrap.servers": bootstrap,
                                                 "log_level": 0})
    try:
        md = admin.list_topics(topic=TOPIC, timeout=10)
    except Exception:
        return {}
    topic = md.topics.get(TOPIC)
    if topic is None or topic.error is not None:
        return {}
    return {p.id: tuple(p.isrs) for p in topic.partitions.values()}


def _until(predicate: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(POLL_S)
    return time.monotonic() - start


def _stable_controller(bootstrap: str, timeout: float) -> int:
    """The quorum leader, once three answers a second apart name it in the same epoch (three
    nodes starting together may take a few elections)."""
    seen: list[tuple[int, int]] = []

    def settled() -> bool:
        quorum = describe_quorum(bootstrap)
        seen.append((-1, -1) if quorum is None else (quorum.leader_id, quorum.epoch))
        time.sleep(1.0)
        return len(seen) >= 3 and len(set(seen[-3:])) == 1 and seen[-1][0] >= 0
    _until(settled, timeout, "a stable quorum leader")
    return seen[-1][0]


def _fenced_lines(cluster: LocalCluster, node_id: int) -> list[str]:
    return [line for line in cluster.node(node_id).log().splitlines()
            if re.search(r"broker \d+ fenced \(", line)]


def measure(root: Path, partitions: int, extra: dict[str, str], timeout: float
            ) -> dict[str, Any]:
    counter = RequestCounter()
    with LocalCluster(root, nodes=3, extra_config=extra, link_tap=counter) as cluster:
        cluster.start()
        controller = _stable_controller(cluster.bootstrap, timeout)
        kept, killed = [n for n in cluster.node_ids if n != controller]
        # Preferred leaders alternate between the two others, the controller last: with
        # `killed` gone every partition is led by `kept`, never by the controller.
        assignment = [[kept, killed, controller] if p % 2 else [killed, kept, controller]
                      for p in range(partitions)]
        admin = KafkaAdmin({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, len(assignment), replica_assignment=assignment)],
                                     request_timeout=60).values():
            f.result()
        full = lambda isrs: len(isrs) == partitions and all(  # noqa: E731
            len(isr) == 3 for isr in isrs.values())
        created = _until(lambda: full(_isrs(cluster.bootstrap)), timeout, "created, in sync")
        # acks=1: the server answers one request of a connection at a time and librdkafka
        # sends one partition per ProduceRequest, so acks=all seeding of 1,000 partitions
        # takes a replication round trip each.
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                             "linger.ms": 20, "log_level": 0})
        for p in range(partitions):
            producer.produce(TOPIC, b"x" * 100, partition=p)
        unacked = producer.flush(120)
        if unacked:
            return {"partitions": partitions, "failed": f"{unacked} of {partitions} "
                    f"records not acknowledged within 120 s of creation",
                    "healthy_fenced": [line for n in cluster.node_ids
                                       for line in _fenced_lines(cluster, n)]}
        cluster.kill_node(killed)
        survivors = ",".join(s.client_address for s in cluster.specs if s.node_id != killed)
        shrunk = _until(lambda: (isrs := _isrs(survivors)) != {} and all(
            killed not in isr for isr in isrs.values()), timeout, "ISRs without the killed")
        before_fenced = len(_fenced_lines(cluster, controller))
        requests_before = counter.count(ALTER_PARTITION)
        started = time.monotonic()
        cluster.start_node(killed, wait=False)
        try:
            expanded = _until(lambda: full(_isrs(survivors)), timeout, "ISRs full again")
        except TimeoutError:
            expanded = float("nan")
        expanded_total = time.monotonic() - started
        fenced = _fenced_lines(cluster, controller)[before_fenced:]
        quorum = describe_quorum(survivors)
        if quorum is None or quorum.leader_id != controller:
            # Requests to another controller (or made in-process) were not counted.
            return {"partitions": partitions, "failed": f"the active controller moved from "
                    f"{controller} to {quorum and quorum.leader_id} during the run",
                    "healthy_fenced": fenced}
        return {"partitions": partitions, "create_s": created, "shrink_s": shrunk,
                "expand_s": expanded if expanded == expanded else None,
                "waited_s": expanded_total,
                "requests": counter.count(ALTER_PARTITION) - requests_before,
                "healthy_fenced": [line for line in fenced
                                   if f"broker {killed} fenced" not in line]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="300,1000",
                        help="comma-separated partition counts (default 300,1000)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds any one wait may take (default 300)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    extra = dict(s.split("=", 1) for s in args.set)
    rows = []
    for n in (int(x) for x in args.partitions.split(",")):
        with tempfile.TemporaryDirectory(prefix="rillet-isr-bench-") as tmp:
            row = measure(Path(tmp), n, extra, args.timeout)
        rows.append(row)
        print(f"{n} partitions: {row}", file=sys.stderr)
    print(f"\nlocal 3-node rillet cluster, RF=3, one broker killed -9 and restarted "
          f"({', '.join(args.set) or 'default timeouts'})\n")
    print(f"{'partitions':>10}{'AlterPartition reqs':>21}{'ISRs full after s':>19}"
          f"{'healthy fenced':>16}")
    for r in rows:
        if "failed" in r:
            print(f"{r['partitions']:>10}  {r['failed']}")
        else:
            expand = f"{r['expand_s']:.1f}" if r["expand_s"] is not None \
                else f">{r['waited_s']:.0f}"
            print(f"{r['partitions']:>10}{r['requests']:>21}{expand:>19}"
                  f"{len(r['healthy_fenced']):>16}")
        for line in r["healthy_fenced"][:3]:
            print(f"{'':>10}  {line.strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
