"""`make demo`: the mission on this machine, each stage named as it starts, counts for the long
waits, the final table printed; the cluster is left up with the commands to look at it.
`make demo-down` (python e2e/demo.py down) removes it.

    python e2e/demo.py [up] [--events-seconds 90] [--no-scaling]
    python e2e/demo.py down

The stages are mission.py's, the same the mission test asserts on.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spark_operator  # noqa: E402
from localk8s import kind  # noqa: E402
from localk8s.kube import Kube  # noqa: E402
from mission import Mission, expected_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "rillet-demo"
OPERATOR_NS = "rillet-system"
RELEASE = "rillet"


class Stages:
    """Numbered stage headers and elapsed times."""

    def __init__(self) -> None:
        self.n = 0
        self.t0 = time.monotonic()

    def start(self, what: str) -> None:
        self.n += 1
        print(f"\n== [{self.n}] {what}  (t+{time.monotonic() - self.t0:.0f}s)", flush=True)

    def info(self, line: str) -> None:
        print(f"   {line}", flush=True)


def _helm() -> str:
    """helm built from its Go module (e2e/helm), cached; `kind.sh up` built it already."""
    out = subprocess.run([str(REPO / "e2e" / "build-k8s"), "helm"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=3600).stdout
    return str(Path(out.strip().splitlines()[-1]) / "helm")


def _table(rows: list[list]) -> str:
    head = ["window_start", "window_end", "key", "events", "amount_sum", "amount_min",
            "amount_max"]
    cells = [head] + [[str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells)


def _watch_producer(m: Mission, job: str, seconds: float, stages: Stages) -> None:
    """Counts while the stream runs: batches the Spark driver finished, what the producer sent."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        stages.info(f"streaming: {m.sent(job)} events sent, {end - time.monotonic():.0f}s left")
        time.sleep(min(10, max(0.0, end - time.monotonic())))


def up(args: argparse.Namespace) -> int:
    stages = Stages()
    stages.start("kind cluster: 1 control plane + 3 workers in zone-a/b/c, the images loaded, "
                 f"the operator's chart installed (release {RELEASE} in {OPERATOR_NS}); "
                 "builds on first run: Go, node image, images (e2e/kind.sh up)")
    kubeconfig = kind.up()
    kube = Kube.from_kubeconfig(str(kubeconfig))

    m = Mission(kube, str(kubeconfig), NAMESPACE, report=stages.info)
    if kube.get_or_none("Namespace", NAMESPACE) is not None:
        raise SystemExit(f"demo: namespace {NAMESPACE} exists: run `make demo-down` first")
    m.create_namespace()
    stages.start("a Cluster of 3 brokers over 3 zones")
    m.create_cluster(3)
    stages.info(f"bootstrap: {m.bootstrap()}")
    stages.start("Topic events: 6 partitions, RF=3, min.insync.replicas=2")
    m.create_topic(m.topic, partitions=6, replicas=3, config={"min.insync.replicas": 2})
    stages.start("producer Job: acks=all idempotent events")
    job = m.start_producer()
    stages.start("the Spark operator (its chart, watching this namespace)")
    stages.info(spark_operator.install(kube, _helm(), str(kubeconfig), [NAMESPACE]).strip())
    stages.start("Spark on Kubernetes: windowed counts as a SparkApplication "
                 "(spark/k8s/sparkapplication.yaml)")
    m.prepare_spark()
    spark_operator.apply_application(m)
    driver, _uid = spark_operator.running_driver(m, spark_operator.APP)
    m.wait_batches(driver, 2, timeout=420)
    stages.info(f"driver log: kubectl logs -n {NAMESPACE} {driver}")
    if not args.no_scaling:
        stages.start("scale 3 -> 5 brokers (replicas move onto the new ones)")
        m.scale(5)
        stages.start("config change that rolls the brokers one at a time")
        m.roll_with_config({"num.replica.fetchers": 2})
        stages.start("scale 5 -> 3 brokers (drained first)")
        m.scale(3)
    stages.start(f"streaming {args.events_seconds:.0f}s more")
    _watch_producer(m, job, args.events_seconds, stages)
    stages.start("stop the producer, let the watermark close every window")
    result = m.stop_producer(job)
    stages.info(f"producer: {result['produced']} produced, {result['failed']} failed")
    expected = expected_rows(result["produced"], m.plan)
    rows: list[list] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        rows = m.read_output()
        stages.info(f"output: {len(rows)} of {len(expected)} windows written")
        if len(rows) >= len(expected):
            break
        time.sleep(10)
    stages.start("result: events per key per 10-second window")
    print(_table(rows), flush=True)
    verdict = "exactly the expected aggregates" if rows == expected else "NOT the expected rows"
    print(f"\n{len(rows)} rows; {result['produced']} events; {verdict}")
    print(f"""
The cluster is still up. Look at it with:
  export KUBECONFIG={kubeconfig}
  kubectl get clusters,topics,pods -n {NAMESPACE}
  kubectl get cluster events -n {NAMESPACE} -o yaml      # status: brokers, rebalance, roll
  kubectl get sparkapplication -n {NAMESPACE}            # the job, kept running by the operator
  kubectl logs -n {NAMESPACE} {driver}                # the Spark driver's batch progress
Remove it with: make demo-down""")
    return 0 if rows == expected else 1


def down(_args: argparse.Namespace) -> int:
    if kind.running():
        kube = Kube.from_kubeconfig(str(kind.kubeconfig()))
        if kube.get_or_none("Namespace", NAMESPACE) is not None:
            print(f"deleting namespace {NAMESPACE} (the operator lets go of its resources)")
            kube.delete("Namespace", NAMESPACE)
            kube.wait_for(f"namespace {NAMESPACE} gone",
                          lambda: kube.get_or_none("Namespace", NAMESPACE) is None, 300, 2)
    kind.down()   # the Spark operator and everything else go with the cluster
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="e2e/demo.py")
    p.add_argument("command", nargs="?", default="up", choices=["up", "down"])
    p.add_argument("--events-seconds", type=float, default=60,
                   help="stream this long after the scaling stages")
    p.add_argument("--no-scaling", action="store_true", help="skip 3 -> 5, the roll and 5 -> 3")
    args = p.parse_args(argv)
    return up(args) if args.command == "up" else down(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
