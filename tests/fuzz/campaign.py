"""A protocol fuzz campaign: mutated client and controller frames against real broker processes.

    .venv/bin/python -m tests.fuzz.campaign --frames 1000000 --seconds 3600   # make fuzz
    .venv/bin/python -m tests.fuzz.campaign --replay fuzz-failures/failed-batch-7.jsonl \\
        --to 127.0.0.1:9092                                                 # one kept batch

Frames come from the recorded corpus (tests/fuzz/corpus.py; every served API version a recording
lacks gets a frame rillet encodes), damaged by tests/fuzz/mutate.py, and go to every listener
of the targets (tests/fuzz/targets.py): client listeners get client traffic, controller
listeners controller traffic (and a little of the other kind, as a stray client would send).
Each frame's API is drawn first, then a frame of it, so an API with few recordings is fuzzed as
often as one with many. A connection carries one mutated frame, or several frames of which some
are mutated, so the broker also meets damage after a valid request on the same connection.

After every batch each node must still run (else a crash) and answer ApiVersions on every
listener within a bound (else a hang); the first failure stops the campaign and the batch is
kept, one line per connection, for --replay. At the end every node must still name a
controller in Metadata. Resident memory and open file descriptors of every node are read
before, after and at every batch. Frames of a connection that could not be opened are not
counted as sent, and a run that sent fewer frames than asked for fails.

Run by itself, it starts a single node and a 3-node cluster in a temporary directory and
splits the frames between them; the test suite runs a short campaign on its own brokers.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from tests.cluster import LocalCluster
from tests.harness import BrokerProcess

from . import corpus
from .mutate import mutate
from .targets import (Target, answers, cluster_targets, fuzz_node, open_fds, closed_by_peer,
                      partitions, rss_kb, serving,
                      single_node_targets)

READ_TIMEOUT_S = 1.0     # a connection the broker keeps open longer is cut (e.g. a long poll)
CONNECT_TIMEOUT_S = 10.0
CROSS_TRAFFIC = 0.1      # share of frames from the other listener's corpus
SOCKETS_SETTLE_S = 60.0  # after the last batch, for the nodes to notice every close

Pools = dict[str, dict[int, list[bytes]]]  # listener -> api key -> frames


class Outcome(Enum):
    CLOSED = "closed"    # the broker read what it was sent and closed (our EOF, or bad frame)
    HELD = "held"        # still open READ_TIMEOUT_S after our EOF (a long poll, say); cut
    REFUSED = "refused"  # could not connect: nothing was sent


@dataclass
class Report:
    frames: int = 0          # sent on connections that were opened
    connections: int = 0
    held_open: int = 0
    refused: int = 0         # connections that could not be opened; their frames not counted
    batches: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # crashes and hangs, with the node
    rss_kb: dict[str, list[int]] = field(default_factory=dict)  # node -> [before, ..., after]
    fds: dict[str, list[int]] = field(default_factory=dict)     # node -> [before, ..., after]
    closed_by_peer: dict[str, int] = field(default_factory=dict)  # node -> after settling
    partitions: dict[str, int] = field(default_factory=dict)     # node -> listed at the end
    kept: list[Path] = field(default_factory=list)  # batches that caused a failure

    @property
    def crashes(self) -> int:
        return sum(1 for f in self.failures if "crashed" in f)

    @property
    def hangs(self) -> int:
        return sum(1 for f in self.failures if "hung" in f or "serving" in f)

    def table(self, title: str) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        lines = [f"{title}: {self.frames:,} frames in {self.connections:,} connections, "
                 f"{self.batches} batches, {self.seconds:.0f} s ({rate:,.0f} frames/s); "
                 f"crashes {self.crashes}, hangs {self.hangs}, held open {self.held_open}, "
                 f"refused {self.refused}",
                 f"  {'node':<8} {'RSS before':>12} {'RSS after':>12} {'RSS peak':>12} "
                 f"{'fds before':>11} {'fds after':>10} {'fds peak':>9} {'CLOSE_WAIT':>10}"
                 f" {'partitions':>11}"]
        for node, rss in sorted(self.rss_kb.items()):
            fds = self.fds[node]
            lines.append(f"  {node:<8} {rss[0] / 1024:>9.1f} MB {rss[-1] / 1024:>9.1f} MB"
                         f" {max(rss) / 1024:>9.1f} MB {fds[0]:>11} {fds[-1]:>10}"
                         f" {max(fds):>9} {self.closed_by_peer.get(node, -1):>10}"
                         f" {self.partitions.get(node, -1):>11}")
        lines += [f"  FAILURE {f}" for f in self.failures]
        lines += [f"  kept {p}" for p in self.kept]
        return "\n".join(lines)


def by_api(frames: list[bytes]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = defaultdict(list)
    for frame in frames:
        out[corpus.api_of(frame)[0]].append(frame)
    return dict(out)


def plan_connections(rng: random.Random, pools: Pools, listener: str,
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
            same_api = pool[rng.choice(sorted(pool))]
            frame = rng.choice(same_api)
            if count == 1 or rng.random() < 0.5:
                frame = mutate(rng, frame, same_api)
            conn.append(frame)
        out.append(conn)
        left -= count
    return out


async def _connection(host: str, port: int, frames: list[bytes]) -> Outcome:
    """Send the frames and our EOF, read until the broker closes, all within a bound."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                CONNECT_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return Outcome.REFUSED
    try:
        # One bound over the whole exchange: a broker that stops reading must not stall
        # the campaign in drain() either.
        async with asyncio.timeout(READ_TIMEOUT_S + CONNECT_TIMEOUT_S):
            writer.write(b"".join(frames))
            await writer.drain()
            writer.write_eof()
            async with asyncio.timeout(READ_TIMEOUT_S):
                while await reader.read(65536):
                    pass
        return Outcome.CLOSED
    except TimeoutError:
        return Outcome.HELD
    except OSError:  # reset: the broker closed on a bad frame before reading everything
        return Outcome.CLOSED
    finally:
        writer.transport.abort()


async def _batch(work: list[tuple[Target, list[bytes]]], concurrency: int) -> list[Outcome]:
    gate = asyncio.Semaphore(concurrency)

    async def one(target: Target, frames: list[bytes]) -> Outcome:
        async with gate:
            return await _connection(target.host, target.port, frames)

    return await asyncio.gather(*(one(t, f) for t, f in work))


def _probe(targets: list[Target]) -> list[str]:
    failures = []
    for target in targets:
        if not target.node.alive():
            code = target.node.proc.returncode if target.node.proc else None
            failures.append(f"{target.name} crashed (exit {code}):\n"
                            + target.node.log()[-3000:])
        elif not answers(target):
            failures.append(f"{target.name} hung: no ApiVersions answer in time")
    return failures


def run(targets: list[Target], frames: int, *, seed: int, seconds: float,
        batch_frames: int = 2000, concurrency: int = 16, keep_dir: Path | None = None,
        pools: dict[str, list[bytes]] | None = None) -> Report:
    """Send ``frames`` mutated frames spread over ``targets``, at most ``seconds`` long."""
    grouped = {name: by_api(pool) for name, pool in (pools or corpus.pools()).items()}
    rng = random.Random(seed)
    nodes = {f"node {t.node.node_id}": t.node for t in targets}
    report = Report(rss_kb={name: [rss_kb(n)] for name, n in nodes.items()},
                    fds={name: [open_fds(n)] for name, n in nodes.items()})
    started = time.monotonic()
    while report.frames < frames and time.monotonic() - started < seconds:
        size = min(batch_frames, frames - report.frames)
        work = []
        for i, target in enumerate(targets):
            share = size // len(targets) + (1 if i < size % len(targets) else 0)
            work += [(target, conn) for conn in
                     plan_connections(rng, grouped, target.listener, share)]
        rng.shuffle(work)
        outcomes = asyncio.run(_batch(work, concurrency))
        for (_, conn), outcome in zip(work, outcomes):
            if outcome is Outcome.REFUSED:
                report.refused += 1
                continue
            report.frames += len(conn)
            report.connections += 1
            report.held_open += outcome is Outcome.HELD
        report.batches += 1
        for name, node in nodes.items():
            report.rss_kb[name].append(rss_kb(node))
            report.fds[name].append(open_fds(node))
        failures = _probe(targets)
        if failures:
            report.failures += failures
            if keep_dir is not None:
                report.kept.append(keep(keep_dir, report.batches, work))
            break
    if not report.failures:
        report.failures += [f"{name} not serving: no controller named in Metadata after the "
                            "campaign" for name, node in nodes.items() if not serving(node)]
    settle_sockets(report, nodes)
    for name, node in nodes.items():
        report.partitions[name] = partitions(node)
    report.seconds = time.monotonic() - started
    return report


def settle_sockets(report: Report, nodes: dict[str, BrokerProcess],
                   timeout: float = SOCKETS_SETTLE_S) -> None:
    """Connections each node still holds after this side closed them, polled for
    ``timeout`` (long polls end, closes are noticed): more than none leaks connections."""
    deadline = time.monotonic() + timeout
    while True:
        now = {name: closed_by_peer(node) for name, node in nodes.items()}
        if time.monotonic() > deadline or not any(now.values()):
            break
        time.sleep(0.5)
    report.closed_by_peer.update(now)
    report.failures += [f"{name} leaks connections: {count} closed by their client "
                        f"{timeout:.0f} s ago are still open" for name, count in now.items()
                        if count]


def keep(keep_dir: Path, batch: int, work: list[tuple[Target, list[bytes]]]) -> Path:
    """The batch that broke a node, a JSON line per connection: where it went, its frames."""
    keep_dir.mkdir(parents=True, exist_ok=True)
    path = keep_dir / f"failed-batch-{batch}.jsonl"
    with path.open("w") as out:
        for target, conn in work:
            out.write(json.dumps({"target": f"{target.host}:{target.port}",
                                  "listener": target.listener,
                                  "frames": [frame.hex() for frame in conn]}) + "\n")
    return path


def replay(path: Path, to: str | None) -> int:
    """Send a kept batch again, connection by connection (to ``to``, or where it first went)."""
    counts: dict[str, int] = defaultdict(int)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        host, port = (to or entry["target"]).rsplit(":", 1)
        frames = [bytes.fromhex(frame) for frame in entry["frames"]]
        counts[asyncio.run(_connection(host, int(port), frames)).value] += 1
    print(f"replayed {path}: {dict(counts)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000,
                        help="frames in all, split between the single node and the cluster")
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=Path("fuzz-failures"),
                        help="where a batch that broke a node is written")
    parser.add_argument("--replay", type=Path, help="send a kept batch again, and stop")
    parser.add_argument("--to", help="with --replay: host:port to send it to instead")
    args = parser.parse_args(argv)
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the nodes (in their own sessions)
    # are stopped by the `finally` and `with` blocks below instead of outliving the campaign.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.replay:
        return replay(args.replay, args.to)
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
    sent = sum(r.frames for _, r in reports)
    bad = sum(len(r.failures) for _, r in reports)
    short = sent < args.frames
    print(f"total: {sent:,} of {args.frames:,} frames sent, {bad} failures, seed {seed}"
          + (" (stopped by --seconds before all were sent)" if short else ""))
    return 1 if bad or short else 0


if __name__ == "__main__":
    sys.exit(main())
