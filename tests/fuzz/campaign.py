"""A protocol fuzz campaign: mutated client and controller frames against real broker processes.

    .venv/bin/python -m tests.fuzz.campaign --frames 1000000 --seconds 3600   # make fuzz

Frames come from the recorded corpus (tests/fuzz/corpus.py; every served API version a recording
lacks gets a frame rillet encodes), damaged by tests/fuzz/mutate.py,
and go to every listener of the targets: the client listeners get client traffic, the
controller listeners controller traffic (and a little of the other kind, as a stray client
would send). A connection carries one mutated frame, or several frames of which some are
mutated, so the broker also meets damage after a valid request on the same connection. After
every batch each node must still run (a crash) and answer ApiVersions on every listener within
a bound (a hang); the first failure stops the campaign, and the batch that caused it is kept
for replaying. Resident memory of every node is read before, after and at every batch.

Run by itself, it starts a single node and a 3-node cluster in a temporary directory and
splits the frames between them; the test suite runs a short campaign on its own brokers.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster import LocalCluster
from tests.harness import BrokerProcess, free_port
from tests.wire import Wire

from . import corpus
from .mutate import mutate

READ_TIMEOUT_S = 1.0     # a connection the broker keeps open longer is cut (e.g. a long poll)
PROBE_TIMEOUT_S = 10.0   # a listener that cannot answer ApiVersions within this has hung
CROSS_TRAFFIC = 0.1      # share of frames from the other listener's corpus


@dataclass(frozen=True)
class Target:
    """One listener of one node."""
    node: BrokerProcess
    host: str
    port: int
    listener: str  # "client" or "controller": which corpus feeds it

    @property
    def name(self) -> str:
        return f"node {self.node.node_id} {self.listener} :{self.port}"


@dataclass
class Report:
    frames: int = 0
    connections: int = 0
    held_open: int = 0  # connections the broker had not closed READ_TIMEOUT_S after our EOF
    batches: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # crashes and hangs, with the node
    rss_kb: dict[str, list[int]] = field(default_factory=dict)  # node -> [before, ..., after]
    kept: list[Path] = field(default_factory=list)  # batches that caused a failure

    @property
    def crashes(self) -> int:
        return sum(1 for f in self.failures if "crashed" in f)

    @property
    def hangs(self) -> int:
        return sum(1 for f in self.failures if "hung" in f)

    def table(self, title: str) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        lines = [f"{title}: {self.frames:,} frames in {self.connections:,} connections, "
                 f"{self.batches} batches, {self.seconds:.0f} s ({rate:,.0f} frames/s); "
                 f"crashes {self.crashes}, hangs {self.hangs}, held open {self.held_open}",
                 f"  {'node':<8} {'RSS before':>12} {'RSS after':>12} {'RSS peak':>12}"]
        for node, series in sorted(self.rss_kb.items()):
            lines.append(f"  {node:<8} {series[0] / 1024:>9.1f} MB {series[-1] / 1024:>9.1f} MB"
                         f" {max(series) / 1024:>9.1f} MB")
        lines += [f"  FAILURE {f}" for f in self.failures]
        lines += [f"  kept {p}" for p in self.kept]
        return "\n".join(lines)


def rss_kb(node: BrokerProcess) -> int:
    """Resident set size of the node's process, 0 when it is gone."""
    if node.proc is None:
        return 0
    try:
        for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def answers(target: Target, timeout: float = PROBE_TIMEOUT_S) -> bool:
    try:
        with Wire(f"{target.host}:{target.port}", timeout=timeout) as wire:
            return wire.request(18, 0, {}).error_code == 0
    except OSError:
        return False


def plan_connections(rng: random.Random, pools: dict[str, list[bytes]], listener: str,
                     frames: int) -> list[list[bytes]]:
    """``frames`` frames for one target, grouped into connections: half carry one mutated
    frame, the rest 2-8 frames each mutated with probability one half."""
    other = [name for name in pools if name != listener]
    out: list[list[bytes]] = []
    left = frames
    while left > 0:
        count = 1 if rng.random() < 0.5 else min(left, rng.randint(2, 8))
        conn = []
        for _ in range(count):
            pool = pools[rng.choice(other)] if other and rng.random() < CROSS_TRAFFIC \
                else pools[listener]
            frame = rng.choice(pool)
            if count == 1 or rng.random() < 0.5:
                frame = mutate(rng, frame, pool)
            conn.append(frame)
        out.append(conn)
        left -= count
    return out


async def _connection(target: Target, frames: list[bytes]) -> bool:
    """Send the frames and our EOF, read until the broker closes; False when it held the
    connection open past READ_TIMEOUT_S (we then cut it)."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(target.host, target.port), PROBE_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return True  # refused under load: the probe after the batch judges the node
    try:
        writer.write(b"".join(frames))
        await writer.drain()
        writer.write_eof()
        async with asyncio.timeout(READ_TIMEOUT_S):
            while await reader.read(65536):
                pass
        return True
    except TimeoutError:
        return False
    except OSError:  # reset: the broker closed on a bad frame before reading everything
        return True
    finally:
        writer.transport.abort()


async def _batch(work: list[tuple[Target, list[bytes]]], concurrency: int) -> int:
    """Run the connections, ``concurrency`` at a time; how many were held open."""
    gate = asyncio.Semaphore(concurrency)

    async def one(target: Target, frames: list[bytes]) -> bool:
        async with gate:
            return await _connection(target, frames)

    done = await asyncio.gather(*(one(t, f) for t, f in work))
    return sum(1 for ok in done if not ok)


def _probe(targets: list[Target]) -> list[str]:
    failures = []
    for target in targets:
        if not target.node.alive():
            failures.append(f"{target.name} crashed (exit {target.node.proc.returncode}):\n"
                            + target.node.log()[-3000:])
        elif not answers(target):
            failures.append(f"{target.name} hung: no ApiVersions answer within "
                            f"{PROBE_TIMEOUT_S:.0f} s")
    return failures


def run(targets: list[Target], frames: int, *, seed: int, seconds: float,
        batch_frames: int = 2000, concurrency: int = 16, keep_dir: Path | None = None,
        pools: dict[str, list[bytes]] | None = None) -> Report:
    """Send ``frames`` mutated frames spread over ``targets``, at most ``seconds`` long."""
    pools = pools or corpus.pools()
    rng = random.Random(seed)
    nodes = {t.node.node_id: t.node for t in targets}
    report = Report(rss_kb={f"node {i}": [rss_kb(n)] for i, n in nodes.items()})
    started = time.monotonic()
    while report.frames < frames and time.monotonic() - started < seconds:
        size = min(batch_frames, frames - report.frames)
        work = []
        for i, target in enumerate(targets):
            share = size // len(targets) + (1 if i < size % len(targets) else 0)
            work += [(target, conn) for conn in
                     plan_connections(rng, pools, target.listener, share)]
        rng.shuffle(work)
        report.held_open += asyncio.run(_batch(work, concurrency))
        report.frames += sum(len(conn) for _, conn in work)
        report.connections += len(work)
        report.batches += 1
        for node_id, node in nodes.items():
            report.rss_kb[f"node {node_id}"].append(rss_kb(node))
        failures = _probe(targets)
        if failures:
            report.failures += failures
            if keep_dir is not None:
                report.kept.append(_keep(keep_dir, report.batches, work))
            break
    report.seconds = time.monotonic() - started
    return report


def _keep(keep_dir: Path, batch: int, work: list[tuple[Target, list[bytes]]]) -> Path:
    """The batch that broke a node, one file per listener kind, to replay."""
    keep_dir.mkdir(parents=True, exist_ok=True)
    path = keep_dir / f"failed-batch-{batch}.frames"
    path.write_bytes(b"".join(b"".join(conn) for _, conn in work))
    return path


# The node a single-node campaign fuzzes: a PLAINTEXT and a SASL_PLAINTEXT client listener (the
# SASL one decodes only the handshake APIs before authentication: a path of its own), and the
# StandardAuthorizer with the PLAINTEXT principal a super user, so ACL requests are acted on.
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_paula="paula-secret";')
NODE_CONFIG = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "connection.failed.authentication.delay.ms": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS"}


def fuzz_node(data_dir: Path) -> BrokerProcess:
    """A single node (not started) with the listeners `single_node_targets` names."""
    node = BrokerProcess(data_dir, config=NODE_CONFIG)
    node.config["listeners"] = (f"PLAINTEXT://{node.host}:{node.port},"
                                f"SASL_PLAINTEXT://{node.host}:{free_port(node.host)}")
    return node


def single_node_targets(node: BrokerProcess) -> list[Target]:
    """Every client listener of a node made by `fuzz_node` (or the one of a plain node)."""
    listeners = node.config.get("listeners", f"PLAINTEXT://{node.host}:{node.port}")
    return [Target(node, node.host, int(address.rsplit(":", 1)[1]), "client")
            for address in listeners.split(",")]


def cluster_targets(cluster: LocalCluster) -> list[Target]:
    out = []
    for spec in cluster.specs:
        node = cluster.node(spec.node_id)
        out.append(Target(node, spec.host, spec.client_port, "client"))
        out.append(Target(node, spec.host, spec.controller_port, "controller"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000,
                        help="frames in all, split between the single node and the cluster")
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=Path("fuzz-failures"),
                        help="where a batch that broke a node is written")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed}", flush=True)
    reports = []
    with tempfile.TemporaryDirectory(prefix="rillet-fuzz-") as tmp:
        single = fuzz_node(Path(tmp) / "single" / "data").start()
        try:
            reports.append(("single node", run(
                single_node_targets(single), args.frames // 2, seed=seed,
                seconds=args.seconds / 2, keep_dir=args.keep)))
        finally:
            single.stop()
        print(reports[-1][1].table(reports[-1][0]), flush=True)
        with LocalCluster(Path(tmp) / "cluster", nodes=3, proxied=False) as cluster:
            cluster.start()
            reports.append(("3-node cluster", run(
                cluster_targets(cluster), args.frames - args.frames // 2, seed=seed + 1,
                seconds=args.seconds / 2, keep_dir=args.keep)))
        print(reports[-1][1].table(reports[-1][0]), flush=True)
    total = sum(r.frames for _, r in reports)
    bad = sum(len(r.failures) for _, r in reports)
    print(f"total: {total:,} frames, {bad} failures, seed {seed}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
