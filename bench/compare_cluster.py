#!/usr/bin/env python3
"""Three rillet nodes beside three Apache Kafka nodes: replicated produce and consume, one table.

Each system runs as a three-node cluster of combined broker+controller nodes on this machine
(never both systems at once), topic replication factor 3, min.insync.replicas=2, acks=all,
driven by Kafka's own kafka-producer-perf-test / kafka-consumer-perf-test (as bench/compare.py):

- producer MB/s, 1 KiB records, 1 and 8 partitions, unthrottled;
- produce latency p50/p99 at a fixed rate (--latency-rate records/s, 1 partition);
- consumer MB/s (fetch MB/s) for 1 and 8 partitions;
- total peak RSS of the three nodes;
- time from spawning the three processes to the first acknowledged acks=all write.

Each round starts fresh clusters, warms each up with the same workload (discarded), then runs
the rows with their order rotated between rounds; the table shows per-row medians with the
rounds' min-max (bench/measurements.py).

    .venv/bin/python bench/compare_cluster.py [--records 100000] [--rounds 1]
                                              [--systems rillet,kafka]
"""
from __future__ import annotations

import argparse
import base64
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import (KAFKA_TOOLS, KAFKA_VERSION, MB, compile_source,  # noqa: E402
                     consumer_perf, free_port, producer_perf, run_tool, runtime_rillet,
                     source_env)
from measurements import (Measurements, error_lines, ratio, rotated,  # noqa: E402
                          run_rounds, summarise, with_spread)
from processes import process_tree, vm_hwm  # noqa: E402

from rillet.local_cluster import NodeSpec, cluster_settings, serve_command  # noqa: E402

NODES = 3
CASES = (1, 8)


class Cluster:
    name = "?"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.ports = [(free_port(), free_port()) for _ in range(NODES)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.cmds: list[list[str]] = []   # each node's command, fixed at start (restarts reuse it)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{client}" for client, _ in self.ports)

    def commands(self) -> list[list[str]]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Work before the clock starts (Kafka's storage format)."""

    def start(self) -> float:
        """Spawn the nodes; seconds until an acks=all write to an RF=3 topic is acknowledged."""
        self.prepare()
        self.cmds = self.commands()
        started = time.monotonic()
        for index in range(NODES):
            self.spawn(index)
        deadline = started + 180
        while time.monotonic() < deadline:
            if self._first_write():
                return time.monotonic() - started
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: no acks=all write within 180 s")

    def _first_write(self) -> bool:
        try:
            create_topic(self.bootstrap, "bench-first", 1)
        except Exception:
            pass
        try:
            out = run_tool("kafka-producer-perf-test", "--bootstrap-server", self.bootstrap,
                           "--topic", "bench-first", "--num-records", "1", "--record-size", "10",
                           "--throughput", "-1", "--command-property", "acks=all",
                           "--command-property", "delivery.timeout.ms=5000",
                           "--command-property", "request.timeout.ms=4000", timeout=30)
            return "1 records sent" in out
        except Exception:
            return False

    def spawn(self, index: int) -> None:
        """Start node `index` (0-based) from its command, in its own session; a restart
        appends to the same log."""
        with (self.workdir / f"node-{index + 1}.log").open("ab") as log:
            proc = subprocess.Popen(self.cmds[index], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=source_env())
        if index < len(self.procs):
            self.procs[index] = proc
        else:
            self.procs.append(proc)

    def kill(self, index: int) -> None:
        """kill -9 node `index`'s whole process group (no shutdown of any kind)."""
        os.killpg(self.procs[index].pid, signal.SIGKILL)
        self.procs[index].wait(30)

    def node_peak_rss_bytes(self, index: int) -> int:
        """VmHWM of node `index`'s process tree (since its last start)."""
        return sum(vm_hwm(pid) for pid in process_tree(self.procs[index].pid))

    def peak_rss_bytes(self) -> int:
        return sum(self.node_peak_rss_bytes(i) for i in range(len(self.procs)))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


class RilletCluster(Cluster):
    name = "rillet"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        # Each node's HTTP admin endpoint (GET /metrics), for benches that read its metrics.
        self.admin_ports = [free_port() for _ in range(NODES)]

    def commands(self) -> list[list[str]]:
        specs = [NodeSpec(i, self.workdir / f"node-{i}", client, controller)
                 for i, (client, controller) in enumerate(self.ports, 1)]
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        settings = cluster_settings(specs, cluster_id, None,
                                    {"group.initial.rebalance.delay.ms": 0})
        for spec, port in zip(specs, self.admin_ports):
            settings[spec.node_id]["admin.http.listener"] = f"127.0.0.1:{port}"
        python = str(runtime_rillet().parent / "python")
        return [serve_command(settings[s.node_id], python=python) for s in specs]


class KafkaCluster(Cluster):
    name = "kafka"

    def _voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in enumerate(self.ports, 1))

    def prepare(self) -> None:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        for i, (client, controller) in enumerate(self.ports, 1):
            node = self.workdir / f"node-{i}"
            node.mkdir(parents=True)
            # Appended to kafka-server's single-node settings: later keys win.
            (node / "extra.properties").write_text(
                f"node.id={i}\ncontroller.quorum.voters={self._voters()}\n"
                "offsets.topic.replication.factor=3\ntransaction.state.log.replication.factor=3\n"
                "transaction.state.log.min.isr=2\n")
            subprocess.run([str(KAFKA_TOOLS / "kafka-server"), "format", str(node), str(client),
                            str(controller)], check=True, timeout=180,
                           env={**os.environ, "KAFKA_CLUSTER_ID": cluster_id})

    def commands(self) -> list[list[str]]:
        return [[str(KAFKA_TOOLS / "kafka-server"), "run", str(self.workdir / f"node-{i}")]
                for i in range(1, NODES + 1)]


def cluster_for(system: str, workdir: Path) -> Cluster:
    """A not yet started cluster of `system` ("rillet" or "kafka") in `workdir`."""
    return RilletCluster(workdir) if system == "rillet" else KafkaCluster(workdir)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--if-not-exists",
             "--topic", topic, "--partitions", str(partitions), "--replication-factor", "3",
             "--config", "min.insync.replicas=2", timeout=120)


def warm_up(cluster: Cluster, args: argparse.Namespace) -> dict[str, float]:
    """The produce and consume cases once on their own topics, discarded: the JVMs' JIT and
    both systems' caches are warm before anything is measured."""
    if args.warmup_records <= 0:
        return {}
    t0 = time.monotonic()
    for parts in CASES:
        create_topic(cluster.bootstrap, f"warmup-p{parts}", parts)
        producer_perf(cluster.bootstrap, f"warmup-p{parts}", args.warmup_records, "all", -1,
                      args.step_timeout)
    consumer_perf(cluster.bootstrap, f"warmup-p{CASES[-1]}", args.warmup_records,
                  args.step_timeout)
    print(f"    warmed up ({args.warmup_records} records per case, "
          f"{time.monotonic() - t0:.0f} s, discarded)", file=sys.stderr)
    return {}


def measure(cluster: Cluster, args: argparse.Namespace, round_no: int = 0) -> Measurements:
    m = Measurements()
    print(f"== {cluster.name} x{NODES} ({cluster.workdir})", file=sys.stderr)
    try:
        m.attempt(["first_write_s"], lambda: {"first_write_s": cluster.start()})
        if "first_write_s" in m.errors:
            return m
        m.attempt(["warmup"], lambda: warm_up(cluster, args))
        for parts in rotated(CASES, round_no):
            topic = f"bench-p{parts}"

            def produce(topic: str = topic, parts: int = parts) -> dict[str, float]:
                create_topic(cluster.bootstrap, topic, parts)
                r = producer_perf(cluster.bootstrap, topic, args.records, "all", -1,
                                  args.step_timeout)
                print(f"    produce p{parts}: {r}", file=sys.stderr)
                return {f"produce_p{parts}_mb_s": r["mb_s"]}

            m.attempt([f"produce_p{parts}_mb_s"], produce)

        def latency() -> dict[str, float]:
            create_topic(cluster.bootstrap, "bench-latency", 1)
            r = producer_perf(cluster.bootstrap, "bench-latency", args.latency_records, "all",
                              args.latency_rate, args.step_timeout)
            print(f"    latency: {r}", file=sys.stderr)
            return {"latency_p50_ms": r["p50_ms"], "latency_p99_ms": r["p99_ms"]}

        m.attempt(["latency_p50_ms", "latency_p99_ms"], latency)
        for parts in rotated(CASES, round_no):
            def consume(parts: int = parts) -> dict[str, float]:
                r = consumer_perf(cluster.bootstrap, f"bench-p{parts}", args.records,
                                  args.step_timeout)
                print(f"    consume p{parts}: {r}", file=sys.stderr)
                return {f"consume_p{parts}_mb_s": r["fetch_mb_s"]}

            m.attempt([f"consume_p{parts}_mb_s"], consume)
        m.attempt(["rss_mb"], lambda: {"rss_mb": cluster.peak_rss_bytes() / MB})
    finally:
        cluster.stop()
    return m


ROWS = [("first_write_s", "start to first acks=all write (s)", False),
        ("produce_p1_mb_s", "produce MB/s, 1 partition", True),
        ("produce_p8_mb_s", "produce MB/s, 8 partitions", True),
        ("latency_p50_ms", "produce p50 ms at fixed rate", False),
        ("latency_p99_ms", "produce p99 ms at fixed rate", False),
        ("consume_p1_mb_s", "consume MB/s, 1 partition", True),
        ("consume_p8_mb_s", "consume MB/s, 8 partitions", True),
        ("rss_mb", "peak RSS of 3 nodes (MB)", False)]


def render(results: dict[str, Measurements], args: argparse.Namespace) -> str:
    head = (f"3 nodes each (combined broker+controller), RF=3, min.insync.replicas=2, acks=all, "
            f"1 KiB records, {args.records} records; latency at {args.latency_rate} rec/s; "
            f"Kafka {KAFKA_VERSION}; median (min-max) of {args.rounds} round(s), each on fresh "
            f"clusters after a discarded warm-up of {args.warmup_records} records per case, "
            "rows rotated between rounds")
    lines = [head, "", f"{'measure':<36}{'rillet':>24}{'kafka':>24}{'rillet/kafka':>14}"]
    for key, label, _higher_better in ROWS:
        cells = [with_spread(results.get(system), key) for system in ("rillet", "kafka")]
        rk = ratio(results.get("rillet"), results.get("kafka"), key)
        lines.append(f"{label:<36}{cells[0]:>24}{cells[1]:>24}{rk:>14}")
    return "\n".join(lines + error_lines(results))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--warmup-records", type=int, default=None,
                        help="records per produce case in the discarded warm-up (default: "
                             "--records; 0 skips it)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latency-records", type=int, default=20000)
    parser.add_argument("--latency-rate", type=int, default=2000)
    parser.add_argument("--step-timeout", type=float, default=600)
    parser.add_argument("--systems", default="rillet,kafka")
    args = parser.parse_args(argv)
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so every `finally` stops its brokers
    # (started in their own sessions, they would outlive this process).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.warmup_records is None:
        args.warmup_records = args.records
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if "rillet" in systems:
        compile_source()

    def one_round(system: str, round_no: int) -> Measurements:
        with tempfile.TemporaryDirectory(prefix=f"bench-{system}-") as tmp:
            return measure(cluster_for(system, Path(tmp)), args, round_no)

    rounds = run_rounds(systems, args.rounds, one_round)
    results = {system: summarise(runs) for system, runs in rounds.items()}
    print(render(results, args))
    return 0 if all(not m.errors for m in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
