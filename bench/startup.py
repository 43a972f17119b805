#!/usr/bin/env python3
"""rillet's start-up time alone: process spawn to the first Metadata answer listing a broker.

The same clock bench/compare.py's "start to first metadata" row uses (tools/kafka/
metadata_probe.py, a fresh empty data dir, so first start includes formatting), without the
Kafka side or the producer rows, repeated --runs times. With several --source dirs (each a
`broker_image` directory holding a `rillet` package, e.g. an exported older commit) the runs
are interleaved, so the load other processes put on the machine falls on every source alike;
one table row per source gives the median and the min-max of the wall clock, and the median
CPU time the broker used until then (what load from other processes does not inflate).

    .venv/bin/python bench/startup.py [--runs 10] [--source DIR ...] [--set key=value ...]

Brokers run from compare.py's runtime venv (only rillet's runtime dependencies, as in the
broker image) unless --rillet-env dev.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "kafka"))
from metadata_probe import wait_ready  # noqa: E402  (stdlib-only module beside the wrappers)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import free_port, runtime_rillet  # noqa: E402
from measurements import rotated  # noqa: E402
from processes import cpu_seconds  # noqa: E402


def compile_tree(source: Path) -> None:
    """Byte-compile a source tree before any clock runs (as compare.py does for this one)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "rillet")],
                   check=True, timeout=300, stdout=subprocess.DEVNULL)


@contextmanager
def running_broker(python: Path, source: Path, extra: list[str], timeout: float
                   ) -> Iterator[tuple[subprocess.Popen[bytes], str, float]]:
    """`rillet serve` from `source` on an empty data dir: (process, bootstrap, seconds from
    spawn to its first Metadata answer); stopped (SIGTERM, then SIGKILL) on leaving."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="rillet-startup-") as tmp:
        command = [str(python), "-m", "rillet", "serve",
                   "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--set", f"log.dirs={tmp}/data",
                   "--set", "group.initial.rebalance.delay.ms=0"]
        for item in extra:
            command += ["--set", item]
        env = {**os.environ, "PYTHONPATH": str(source)}
        with open(Path(tmp) / "broker.log", "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            bootstrap = f"127.0.0.1:{port}"
            yield proc, bootstrap, wait_ready(bootstrap, timeout) - started
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def start_once(python: Path, source: Path, extra: list[str],
               timeout: float) -> tuple[float, float]:
    """(wall, cpu) seconds from spawning `rillet serve` on an empty data dir to its first
    Metadata answer."""
    with running_broker(python, source, extra, timeout) as (proc, _, ready):
        return ready, cpu_seconds(proc.pid)


def broker_python(env: str) -> Path:
    """The interpreter brokers run on: compare.py's runtime venv, or the project's .venv."""
    return (runtime_rillet().parent if env == "runtime" else REPO / ".venv" / "bin") / "python"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """--source, --python and --rillet-env: which broker trees run, on which interpreters."""
    parser.add_argument("--source", type=Path, action="append",
                        help="a broker_image dir to run (repeatable; default: this checkout's)")
    parser.add_argument("--python", type=Path, action="append",
                        help="the interpreter for the --source of the same position (e.g. a "
                             "venv with other dependency versions; default: --rillet-env's)")
    parser.add_argument("--rillet-env", choices=("runtime", "dev"), default="runtime")


def sources_to_run(args: argparse.Namespace) -> dict[Path, Path]:
    """Each source tree (byte-compiled now, before any clock runs) with its interpreter."""
    sources = [s.resolve() for s in (args.source or [REPO / "broker_image"])]
    given = args.python or []
    pythons = {}
    for i, source in enumerate(sources):
        compile_tree(source)
        pythons[source] = given[i] if i < len(given) else broker_python(args.rillet_env)
    return pythons


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    add_source_options(parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra broker config (repeatable)")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    pythons = sources_to_run(args)
    sources = list(pythons)
    seen: dict[Path, list[tuple[float, float]]] = {source: [] for source in sources}
    for run in range(args.runs):
        # Rotate which source goes first, so none always follows another.
        for source in rotated(sources, run):
            seen[source].append(start_once(pythons[source], source, args.set, args.timeout))
    print(f"start to first metadata, {args.runs} runs each, interleaved "
          f"({args.rillet_env} venv):")
    for source, runs in seen.items():
        label = f"{source} ({pythons[source]})"
        wall = [w for w, _ in runs]
        cpu = statistics.median(c for _, c in runs)
        print(f"  median {statistics.median(wall):.3f} s  (min {min(wall):.3f}, "
              f"max {max(wall):.3f})  cpu {cpu:.3f} s  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
