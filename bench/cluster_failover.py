"""Cluster start-up and controller failover times of a local three-node rillet cluster.

    .venv/bin/python bench/cluster_failover.py [--runs 20] [--set key=value ...]

Prints one table: the time from three processes on empty storage to every broker
registered and unfenced, then over --runs rounds of kill -9 of the active controller:
the time until the survivors report a new leader (election) and until a CreateTopics
through them succeeds (metadata writable again). The killed node is restarted and
caught up before the next round. Timeouts are Kafka's defaults unless --set.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient as KafkaAdmin  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from tests.cluster import LocalCluster, describe_quorum, live_brokers  # noqa: E402

POLL_S = 0.02
ASK_TIMEOUT_S = 2   # a node that does not answer this fast counts as not there yet


def _create(bootstrap: str, name: str) -> bool:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    try:
        for future in admin.create_topics([NewTopic(name, 1, 1)], request_timeout=2).values():
            future.result()
        return True
    except Exception:
        return False


def _until(predicate: Any, timeout: float = 120.0) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError("condition not reached")
        time.sleep(POLL_S)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    extra = dict(s.split("=", 1) for s in args.set)
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(Path(tmp), nodes=3, proxied=False, extra_config=extra) as cluster:
        started = time.monotonic()
        cluster.start()
        ready = time.monotonic() - started + _until(
            lambda: live_brokers(cluster.bootstrap, ASK_TIMEOUT_S) == 3)
        elections, writable = [], []
        for run in range(args.runs):
            quorum = describe_quorum(cluster.bootstrap, ASK_TIMEOUT_S)
            assert quorum is not None
            leader, epoch = quorum.leader_id, quorum.epoch
            survivors = ",".join(s.client_address for s in cluster.specs if s.node_id != leader)
            cluster.kill_node(leader)
            t0 = time.monotonic()
            _until(lambda: (q := describe_quorum(survivors, ASK_TIMEOUT_S)) is not None
                   and q.epoch > epoch and q.leader_id != leader)
            elections.append(time.monotonic() - t0)
            _until(lambda: _create(survivors, f"round-{run}"))
            writable.append(time.monotonic() - t0)
            cluster.start_node(leader)
            _until(lambda: live_brokers(cluster.bootstrap, ASK_TIMEOUT_S) == 3)
            print(f"round {run + 1}: election {elections[-1]:.2f} s, "
                  f"writable {writable[-1]:.2f} s", file=sys.stderr)
    print(f"\nlocal 3-node rillet cluster, {args.runs} kill -9 rounds of the active controller"
          f" ({', '.join(args.set) or 'default timeouts'})\n")
    print(f"{'measure':<44}{'median s':>10}{'max s':>10}")
    print(f"{'ready from empty storage (3 brokers unfenced)':<44}{ready:>10.2f}{ready:>10.2f}")
    for name, values in (("new leader elected after kill -9", elections),
                         ("CreateTopics succeeds again after kill -9", writable)):
        print(f"{name:<44}{statistics.median(values):>10.2f}{max(values):>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
