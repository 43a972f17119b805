"""`python -m tests.fuzz.capture [--only SOURCES]`: the options, the capture of each chosen
source into the corpus, and the report (the package docstring says more)."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from tests.fuzz import capture, corpus
from tests.fuzz.capture.aiokafka import aiokafka_workload
from tests.fuzz.capture.common import BROKER_CONFIG, Run, recorded_broker
from tests.fuzz.capture.controller import controller_workload
from tests.fuzz.capture.java import java_txn_workload, java_workload
from tests.fuzz.capture.kafka_python import kafka_python_workload
from tests.fuzz.capture.librdkafka import librdkafka_txn_workload, librdkafka_workload
from tests.fuzz.capture.report import report, select
from tests.fuzz.capture.sasl import SASL_CONFIG, sasl_workload
from tests.fuzz.recording import StreamTap
from tests.integration.java_tools import fetch_kafka_jars


CLIENT_SOURCES: dict[str, tuple[Callable[[Run], None], dict[str, Any], str]] = {
    "java": (java_workload, BROKER_CONFIG, "PLAINTEXT"),
    "java-txn": (java_txn_workload, BROKER_CONFIG, "PLAINTEXT"),
    "librdkafka": (librdkafka_workload, BROKER_CONFIG, "PLAINTEXT"),
    "librdkafka-txn": (librdkafka_txn_workload, BROKER_CONFIG, "PLAINTEXT"),
    "kafka-python": (kafka_python_workload, BROKER_CONFIG, "PLAINTEXT"),
    "aiokafka": (aiokafka_workload, BROKER_CONFIG, "PLAINTEXT"),
    "sasl": (sasl_workload, SASL_CONFIG, "SASL_PLAINTEXT"),
}
ALL_SOURCES = [*CLIENT_SOURCES, "rillet"]


def capture_client(source: str, tmp: Path) -> list[tuple[str, str, bool]]:
    workload, config, protocol = CLIENT_SOURCES[source]
    root = tmp / source
    root.mkdir()
    with recorded_broker(root, dict(config), protocol) as proxy:
        run = Run(source, proxy.bootstrap, root)
        run.attempt("workload", workload, run)
        frames = proxy.frames()
    _keep(source, "client", frames)
    return run.failures


def capture_controller(tmp: Path) -> list[tuple[str, str, bool]]:
    run = Run("rillet", "", tmp)
    tap = StreamTap()
    run.attempt("cluster", controller_workload, tmp, run, tap)
    _keep("rillet", "controller", tap.frames())
    return run.failures


def _keep(source: str, listener: str, frames: list[bytes]) -> None:
    kept = select(frames)
    if not kept:
        print(f"{source}: nothing recorded; its corpus file is left as it was", flush=True)
        return
    path = corpus.write(source, listener, kept)
    largest = max(len(f) for f in kept)
    print(f"{source}: {len(frames)} frames recorded, {len(kept)} kept "
          f"({path.stat().st_size} bytes, largest {largest}) -> {path.name}", flush=True)


def main(argv: list[str] | None = None) -> int:
    # Named as it is run: the default, this file's name, would say "__main__.py".
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.capture",
                                     description=capture.__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(ALL_SOURCES),
                        help=f"comma-separated sources among {','.join(ALL_SOURCES)}")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(ALL_SOURCES)
    if unknown:
        parser.error(f"unknown sources {sorted(unknown)}")
    started = time.monotonic()
    if {"java", "java-txn", "sasl", "rillet"} & set(chosen):
        fetch_kafka_jars()
    failures: dict[str, list[tuple[str, str, bool]]] = {}
    with tempfile.TemporaryDirectory(prefix="rillet-capture-") as tmp:
        for source in chosen:
            print(f"== {source} ({time.monotonic() - started:.0f}s)", flush=True)
            if source == "rillet":
                failures[source] = capture_controller(Path(tmp))
            else:
                failures[source] = capture_client(source, Path(tmp))
    report(failures, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
