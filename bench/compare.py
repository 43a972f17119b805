#!/usr/bin/env python3
"""rillet beside Apache Kafka: the same workload, the same client, the same machine, one run.

Starts a fresh single node of each system in turn (never both at once: this machine has 2 cores
and the client JVM needs one), drives it with Kafka's own kafka-producer-perf-test and
kafka-consumer-perf-test (tools/kafka/, jars from Maven Central), and prints one table with
rillet, Kafka and the rillet/Kafka ratio:

- producer records/s and MB/s, 1 KB records, acks=1 and acks=all (idempotent, the Java default),
  1 and 8 partitions, unthrottled;
- produce latency p50/p99 from a separate run throttled to --latency-rate records/s (an
  unthrottled run measures the client's queue, not the broker);
- transactional produce records/s and MB/s (--transactional-id, a commit every 100 ms),
  8 partitions;
- consumer MB/s (the tool's fetch MB/s, which leaves out the group join) for 1 and 8 partitions;
- per produce row, the CPU time per record of the broker (user + system of its processes,
  ended threads included, from /proc) and of the client (the tool's JVM from its rusage, its
  start and exit included: some 1.2 s of CPU whatever the record count): on 2 cores the
  client needs more than one of them, so the MB/s rows measure the pair; the broker's CPU per
  record is what it costs on its own;
- broker peak RSS (VmHWM of the broker process tree, read before it stops);
- start-up: from process start to the first Metadata answer that lists a broker. Kafka's storage
  format runs before its clock starts; rillet formats itself on first start, inside its clock.

rillet runs from a venv with only its runtime dependencies (as in the broker image), created
once under the cache; --rillet-env dev uses the project's .venv instead. Either way this
checkout's broker source is byte-compiled before the first start, as an installed broker's is.
Both nodes get group.initial.rebalance.delay.ms=0 (Kafka's shipped single-node config).
--rounds N repeats the whole comparison, alternating which system goes first, and shows per-row
medians with the rounds' min-max; each round warms its fresh node up first (discarded).

Every step has a timeout and a failed step shows as "error" in its cell, so a partly working
broker still yields a table. Usage:

    .venv/bin/python bench/compare.py [--records 200000] [--rounds 1] [--systems rillet,kafka]
                                      [--json out.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KAFKA_TOOLS = REPO / "tools" / "kafka"
sys.path.insert(0, str(KAFKA_TOOLS))
from metadata_probe import wait_ready  # noqa: E402  (stdlib-only module beside the wrappers)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measurements import (Measurements, error_lines, ratio, rotated,  # noqa: E402
                          run_rounds, summarise, with_spread)
from processes import process_tree, tree_cpu_seconds, vm_hwm  # noqa: E402

RECORD_SIZE = 1024
MB = 1024 * 1024
KAFKA_VERSION = re.search(r"<kafka.version>([^<]+)<",
                          (REPO / "tools" / "jars" / "kafka" / "pom.xml").read_text()).group(1)


# --- brokers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Broker:
    """One broker process under test: started fresh in its own temp dir, stopped at the end."""

    name = "?"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def prepare(self) -> None:
        """Work done before the start-up clock runs (Kafka's storage format)."""

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float) -> float:
        """Start the process; return seconds from spawn to the first good Metadata answer."""
        self.prepare()
        log = self.log_path.open("wb")
        started = time.monotonic()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env=source_env(),
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        try:
            ready = wait_ready(self.bootstrap, timeout)
        except TimeoutError:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise TimeoutError(f"{self.name} not ready in {timeout}s; log tail:\n{tail}") from None
        return ready - started

    def peak_rss_bytes(self) -> int:
        """VmHWM summed over the broker process and its descendants."""
        assert self.proc is not None
        return sum(vm_hwm(pid) for pid in process_tree(self.proc.pid))

    def cpu_seconds(self) -> float:
        """CPU time the broker's processes have used so far, ended threads included."""
        assert self.proc is not None
        return tree_cpu_seconds(self.proc.pid)

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class KafkaBroker(Broker):
    name = "kafka"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.controller_port = free_port()

    def prepare(self) -> None:
        subprocess.run([str(KAFKA_TOOLS / "kafka-server"), "format", str(self.workdir),
                        str(self.port), str(self.controller_port)], check=True, timeout=180)

    def command(self) -> list[str]:
        # `run` execs java, so the spawned pid is the JVM's.
        return [str(KAFKA_TOOLS / "kafka-server"), "run", str(self.workdir)]


class RilletBroker(Broker):
    name = "rillet"
    executable = REPO / ".venv" / "bin" / "rillet"

    def command(self) -> list[str]:
        return [str(self.executable), "serve",
                "--set", f"listeners=PLAINTEXT://{self.bootstrap}",
                "--set", f"log.dirs={self.workdir / 'data'}",
                # the same single-node setting the Kafka node gets (see tools/kafka/kafka-server)
                "--set", "group.initial.rebalance.delay.ms=0"]


def runtime_rillet() -> Path:
    """`rillet` from a venv holding only the runtime dependencies, as the broker image has.

    The dev venv also holds the test extras, and kio imports hypothesis whenever it is
    importable (~0.5 s of start-up a deployed broker never pays). Created once under the cache,
    keyed by pyproject.toml; the install is editable, so it always runs the current source.
    """
    cache = Path(os.environ.get("RILLET_CACHE", Path.home() / ".cache" / "rillet"))
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]
    venv = cache / f"bench-runtime-venv-{digest}"
    if not (venv / ".complete").exists():
        for stale in cache.glob("bench-runtime-venv-*"):  # earlier pyproject versions
            shutil.rmtree(stale, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-e", str(REPO)],
                       check=True, timeout=900)
        (venv / ".complete").touch()
    return venv / "bin" / "rillet"


def compile_source() -> None:
    """Byte-compile this checkout's broker source before any clock runs. Brokers run it from
    PYTHONPATH (source_env); with PYTHONDONTWRITEBYTECODE set (this machine's shells, the
    broker image's build) nothing would cache the bytecode, and every start would compile
    some 400 modules inside its start-up clock, which an installed broker never does (pip
    byte-compiles what it installs)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(REPO / "broker_image" / "rillet")], check=True, timeout=300,
                   stdout=subprocess.DEVNULL)


def source_env() -> dict[str, str]:
    """The environment a broker process is spawned with: this checkout's rillet source first
    on the path. The cached runtime venv is shared by every checkout on the machine, and its
    editable install points at whichever one created it."""
    path = os.environ.get("PYTHONPATH")
    source = str(REPO / "broker_image")
    return {**os.environ, "PYTHONPATH": f"{source}:{path}" if path else source}


# --- Kafka's tools ---------------------------------------------------------------------------


def run_tool(tool: str, *args: str, timeout: float) -> str:
    """Run a wrapper from tools/kafka; return stdout.

    Raises on a non-zero exit, and on an exception trace in stderr: the perf tools print failed
    sends' exceptions and still exit 0, and a number measured over failures means nothing.
    """
    proc = subprocess.run([str(KAFKA_TOOLS / tool), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or "Exception" in proc.stderr:
        raise RuntimeError(f"{tool} exited {proc.returncode}: {proc.stderr.strip()[-800:]}"
                           f" {proc.stdout.strip()[-400:]}")
    return proc.stdout


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
             "--partitions", str(partitions), "--replication-factor", "1", timeout=120)


_PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def producer_perf(bootstrap: str, topic: str, records: int, acks: str, throughput: int,
                  timeout: float, *extra: str) -> dict[str, float]:
    """The tool's summary line, and ``client_cpu_s``: the CPU time the tool's JVM used (its
    start included), which this process's children's rusage holds once it has been waited
    for. So no other child may end during the run: the benches run their tools one at a time
    (client_ceiling.py's responder process runs throughout and is reaped after them)."""
    before = _children_cpu_s()
    out = run_tool("kafka-producer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--num-records", str(records), "--record-size", str(RECORD_SIZE),
                   "--throughput", str(throughput), "--command-property", f"acks={acks}",
                   *extra, timeout=timeout)
    client_cpu_s = _children_cpu_s() - before
    matches = _PRODUCER_SUMMARY.findall(out)
    if not matches:
        raise RuntimeError(f"no summary line in producer-perf-test output: {out[-400:]}")
    sent, rps, mbps, _avg, _max, p50, _p95, p99 = matches[-1]
    if int(sent) != records:
        raise RuntimeError(f"sent {sent} of {records} records")
    return {"records_s": float(rps), "mb_s": float(mbps), "p50_ms": float(p50),
            "p99_ms": float(p99), "client_cpu_s": client_cpu_s}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def consumer_perf(bootstrap: str, topic: str, records: int, timeout: float) -> dict[str, float]:
    out = run_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--num-records", str(records), "--timeout", "30000", timeout=timeout)
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(","))))
    consumed = int(row["data.consumed.in.nMsg"])
    if consumed < records:
        raise RuntimeError(f"consumed {consumed} of {records} records")
    return {"fetch_mb_s": float(row["fetch.MB.sec"]), "mb_s": float(row["MB.sec"]),
            "join_ms": float(row["rebalance.time.ms"])}


# --- the workload ---------------------------------------------------------------------------


TXN_DURATION_MS = 100   # --transaction-duration-ms: a commit every 100 ms of sending


def transactional_case(broker: Broker, args: argparse.Namespace) -> dict[str, float]:
    """Transactional produce (issue 26): the perf tool's producer with a transactional.id
    commits a transaction every TXN_DURATION_MS, 8 partitions, unthrottled; each commit is
    AddPartitionsToTxn, EndTxn and the markers written on every partition."""
    topic = "bench-txn-p8"
    create_topic(broker.bootstrap, topic, 8)
    result = producer_perf(broker.bootstrap, topic, args.records, "all", -1, args.step_timeout,
                           "--transactional-id", "bench-txn",
                           "--transaction-duration-ms", str(TXN_DURATION_MS))
    print(f"    transactional: {result}", file=sys.stderr)
    return {"produce_txn_p8_records_s": result["records_s"], "produce_txn_p8_mb_s": result["mb_s"]}


PRODUCE_CASES = [("1", 1), ("1", 8), ("all", 1), ("all", 8)]
# Each produce row's figures: throughput, then the CPU per record of the broker (all its
# threads) and of the client (the perf tool's JVM, its start included). On 2 cores the two
# share the machine, so the throughput is bounded by their sum as much as by either.
PRODUCE_UNITS = ("mb_s", "records_s", "broker_us", "client_us")


def warm_up(broker: Broker, args: argparse.Namespace) -> dict[str, float]:
    """The same workload once, discarded: each produce case on its own topic, then a consume.
    A fresh JVM runs interpreted until its JIT has compiled the hot paths (Kafka measured cold
    produced 25-28 MB/s acks=1, then 35-37 MB/s acks=all right after); rillet's page cache and
    allocator warm alike. Both systems get it, so every measured row is a warm one."""
    records = args.warmup_records
    if records <= 0:
        return {}
    t0 = time.monotonic()
    for acks, partitions in PRODUCE_CASES:
        topic = f"warmup-acks{acks}-p{partitions}"
        create_topic(broker.bootstrap, topic, partitions)
        producer_perf(broker.bootstrap, topic, records, acks, -1, args.step_timeout)
    consumer_perf(broker.bootstrap, "warmup-acks1-p8", records, args.step_timeout)
    print(f"    warmed up ({records} records per case, {time.monotonic() - t0:.0f} s, "
          "discarded)", file=sys.stderr)
    return {}   # no row: nothing measured here is shown


def measure(broker: Broker, args: argparse.Namespace, round_no: int = 0) -> Measurements:
    """One round on a fresh broker: start-up, a warm-up, then the rows in this round's order
    (produce cases rotated, the throttled latency run, consume cases rotated)."""
    m = Measurements()
    print(f"== {broker.name} on {broker.bootstrap} (data in {broker.workdir})", file=sys.stderr)
    try:
        m.attempt(["startup_s"], lambda: {"startup_s": broker.start(args.start_timeout)})
        if "startup_s" in m.errors:
            return m
        print(f"    ready after {m.values['startup_s']:.2f}s", file=sys.stderr)
        m.attempt(["warmup"], lambda: warm_up(broker, args))
        for acks, partitions in rotated(PRODUCE_CASES, round_no):
            key = f"produce_acks{acks}_p{partitions}"
            topic = f"bench-acks{acks}-p{partitions}"

            def produce_case(topic: str = topic, acks: str = acks, parts: int = partitions,
                             key: str = key) -> dict[str, float]:
                create_topic(broker.bootstrap, topic, parts)
                broker_cpu_s = broker.cpu_seconds()
                result = producer_perf(broker.bootstrap, topic, args.records, acks, -1,
                                       args.step_timeout)
                broker_cpu_s = broker.cpu_seconds() - broker_cpu_s
                print(f"    {key}: {result}, broker CPU {broker_cpu_s:.2f} s", file=sys.stderr)
                return {f"{key}_records_s": result["records_s"], f"{key}_mb_s": result["mb_s"],
                        f"{key}_broker_us": broker_cpu_s * 1e6 / args.records,
                        f"{key}_client_us": result["client_cpu_s"] * 1e6 / args.records}

            m.attempt([f"{key}_{unit}" for unit in PRODUCE_UNITS], produce_case)

        def latency_case() -> dict[str, float]:
            create_topic(broker.bootstrap, "bench-latency", 1)
            result = producer_perf(broker.bootstrap, "bench-latency", args.latency_records, "all",
                                   args.latency_rate, args.step_timeout)
            print(f"    latency: {result}", file=sys.stderr)
            return {"latency_p50_ms": result["p50_ms"], "latency_p99_ms": result["p99_ms"]}

        m.attempt(["latency_p50_ms", "latency_p99_ms"], latency_case)
        m.attempt(["produce_txn_p8_records_s", "produce_txn_p8_mb_s"],
                  lambda: transactional_case(broker, args))
        for partitions in rotated((1, 8), round_no):
            topic = f"bench-acks1-p{partitions}"
            key = f"consume_p{partitions}_mb_s"

            def consume_case(topic: str = topic, key: str = key) -> dict[str, float]:
                result = consumer_perf(broker.bootstrap, topic, args.records, args.step_timeout)
                print(f"    {key}: {result}", file=sys.stderr)
                return {key: result["fetch_mb_s"]}

            m.attempt([key], consume_case)
        m.attempt(["peak_rss_mb"], lambda: {"peak_rss_mb": broker.peak_rss_bytes() / MB})
    finally:
        broker.stop()
    return m


# --- the table -------------------------------------------------------------------------------


ROWS: list[tuple[str, str, str]] = [
    # (key, label, which way is better)
    *[(f"produce_acks{a}_p{p}_{unit}", f"produce acks={a} {p} partition{'s' if p > 1 else ''} {label}",
       "higher")
      for a, p in PRODUCE_CASES for unit, label in (("mb_s", "MB/s"), ("records_s", "records/s"))],
    *[(f"produce_acks{a}_p{p}_{unit}", f"produce acks={a} {p} partition{'s' if p > 1 else ''} "
       f"{label}", "lower")
      for a, p in PRODUCE_CASES
      for unit, label in (("broker_us", "broker CPU us/record"),
                          ("client_us", "client CPU us/record (JVM start included)"))],
    ("produce_txn_p8_mb_s", f"produce transactional 8 partitions MB/s "
                            f"(a commit every {TXN_DURATION_MS} ms)", "higher"),
    ("produce_txn_p8_records_s", "produce transactional 8 partitions records/s", "higher"),
    ("consume_p1_mb_s", "consume 1 partition MB/s", "higher"),
    ("consume_p8_mb_s", "consume 8 partitions MB/s", "higher"),
    ("latency_p50_ms", "produce latency p50 ms (acks=all, throttled)", "lower"),
    ("latency_p99_ms", "produce latency p99 ms (acks=all, throttled)", "lower"),
    ("peak_rss_mb", "broker peak RSS MB", "lower"),
    ("startup_s", "start to first metadata s", "lower"),
]


def render(results: dict[str, Measurements], args: argparse.Namespace) -> str:
    rillet, kafka = results.get("rillet"), results.get("kafka")
    header = ("metric", "rillet", f"Kafka {KAFKA_VERSION}", "rillet/Kafka")
    lines = [[label, with_spread(rillet, key), with_spread(kafka, key), ratio(rillet, kafka, key)]
             for key, label, _ in ROWS]
    widths = [max(len(row[i]) for row in [list(header), *lines]) for i in range(4)]
    out = [f"| {' | '.join(h.ljust(w) for h, w in zip(header, widths))} |",
           f"|{'|'.join('-' * (w + 2) for w in widths)}|"]
    out += [f"| {row[0].ljust(widths[0])} | "
            + " | ".join(c.rjust(w) for c, w in zip(row[1:], widths[1:])) + " |" for row in lines]
    out.append(f"median (min-max) of {args.rounds} round(s), each on a fresh node after a "
               f"discarded warm-up of {args.warmup_records} records per produce case and one "
               f"consume, rows rotated between rounds; rillet from the {args.rillet_env} venv; "
               f"{args.records} records x {RECORD_SIZE} B per producer run; latency run "
               f"{args.latency_records} records at {args.latency_rate} records/s; consumer MB/s "
               "is the tool's fetch MB/s (group join excluded). Load average (1/5/15 min) at "
               f"the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on "
               f"{os.cpu_count()} CPUs.")
    return "\n".join(out + error_lines(results))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="rillet,kafka",
                        help="comma-separated subset of rillet,kafka (default both)")
    parser.add_argument("--records", type=int, default=200_000,
                        help="records per producer run (1 KB each)")
    parser.add_argument("--latency-records", type=int, default=10_000)
    parser.add_argument("--latency-rate", type=int, default=1_000, help="records/s when throttled")
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument("--step-timeout", type=float, default=300.0,
                        help="seconds any single tool run may take")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the whole comparison; the table shows per-row medians "
                             "with the rounds' min-max")
    parser.add_argument("--warmup-records", type=int, default=None,
                        help="records per produce case in the discarded warm-up (default: "
                             "--records; 0 skips it)")
    parser.add_argument("--rillet-env", choices=("runtime", "dev"), default="runtime",
                        help="runtime: a venv with only rillet's runtime deps, like the broker "
                             "image (default); dev: the project's .venv")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so every `finally` stops its brokers
    # (started in their own sessions, they would outlive this process).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.warmup_records is None:
        args.warmup_records = args.records
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    brokers = {"rillet": RilletBroker, "kafka": KafkaBroker}
    unknown = set(systems) - set(brokers)
    if unknown:
        print(f"unknown system(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    # fetch the jars first so no download lands inside a measurement
    subprocess.run([str(REPO / "tools" / "fetch-jars"), "kafka"], check=True, timeout=1800,
                   stdout=subprocess.DEVNULL)
    if "rillet" in systems:
        compile_source()
    if args.rillet_env == "runtime" and "rillet" in systems:
        RilletBroker.executable = runtime_rillet()

    def one_round(name: str, round_no: int) -> Measurements:
        workdir = Path(tempfile.mkdtemp(prefix=f"compare-{name}-"))
        try:
            return measure(brokers[name](workdir), args, round_no)
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)

    rounds = run_rounds(systems, args.rounds, one_round)
    results = {name: summarise(runs) for name, runs in rounds.items()}
    print(render(results, args))
    if args.json:
        args.json.write_text(json.dumps(
            {n: {"median": results[n].values, "spread": results[n].spread,
                 "errors": results[n].errors,
                 "rounds": [r.values for r in runs]} for n, runs in rounds.items()}, indent=2))
    return 0 if all(not m.errors for m in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
