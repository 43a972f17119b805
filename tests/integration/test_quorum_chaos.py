"""The metadata quorum under bounded chaos: kill -9, SIGTERM, SIGSTOP, cut and blackholed
links, while a client keeps creating topics. Afterwards every acknowledged creation exists
and every node reports the same metadata.

Short CI setting by default; `make chaos` runs the long one (RILLET_CHAOS_CYCLES,
RILLET_CHAOS_SECONDS, RILLET_CHAOS_SEED). A failing run prints its seed to replay it.
"""
from __future__ import annotations

import os
import random
import threading
from pathlib import Path

from tests.chaos import ChaosPlan, fault_report, run_chaos
from tests.cluster import LocalCluster
from tests.integration.test_cluster import (FAST_FENCING, WAIT_S, _address, _metadata,
                                            _partitions, _quorum, _try_create)
from tests.polling import read_until, wait_until

CYCLES = int(os.environ.get("RILLET_CHAOS_CYCLES", "6"))
SECONDS = float(os.environ.get("RILLET_CHAOS_SECONDS", "45"))


def _topics(cluster: LocalCluster, node_id: int) -> set[str]:
    try:
        return {t for t in _metadata(_address(cluster, node_id)).topics if t.startswith("c-")}
    except Exception:
        return set()


def test_acknowledged_metadata_survives_faults(tmp_path: Path) -> None:
    seed = int(os.environ.get("RILLET_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"chaos seed {seed} (RILLET_CHAOS_SEED={seed} replays the fault schedule)")
    created: list[str] = []

    def workload(stop: threading.Event) -> None:
        i = 0
        while not stop.is_set():
            name = f"c-{i}"
            i += 1
            if _try_create(cluster.bootstrap, name):
                created.append(name)
            stop.wait(0.1)   # a steady stream of changes, not thousands of topics

    with LocalCluster(tmp_path, nodes=3, extra_config=FAST_FENCING).start() as cluster:
        events = run_chaos(cluster, ChaosPlan(cycles=CYCLES, seconds=SECONDS, seed=seed),
                           workload=workload)
        print(f"{len(events)} chaos events, {len(created)} acknowledged creations; "
              f"{fault_report(events)}")
        assert events, "no fault was injected"
        assert created, f"no topic could be created during the chaos (seed {seed})"
        views = {}
        for node_id in cluster.node_ids:
            views[node_id] = read_until(lambda: _topics(cluster, node_id),
                                        lambda t: set(created) <= t, WAIT_S)
            lost = set(created) - views[node_id]
            assert not lost, f"seed {seed}: node {node_id} lacks acknowledged {sorted(lost)}"
        # Creations that timed out on the client may have committed too; all nodes agree.
        wait_until(lambda: len({frozenset(_topics(cluster, i)) for i in cluster.node_ids}) == 1,
                   WAIT_S, "every node to report the same topics")
        some = sorted(created)[0]
        wait_until(lambda: len({tuple(sorted(_partitions(_address(cluster, i), some).items()))
                                for i in cluster.node_ids}) == 1, WAIT_S,
                   "every node to report the same leaders")
        quorum = read_until(lambda: _quorum(cluster.bootstrap),
                            lambda q: q is not None and len(set(q.voters.values())) == 1,
                            WAIT_S)
        assert quorum is not None and len(set(quorum.voters.values())) == 1, (seed, quorum)
