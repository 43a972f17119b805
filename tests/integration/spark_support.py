"""Fixtures and helpers for the Spark job tests (tests/integration/test_spark_job.py).

Spark runs in local mode (local[2]) inside the test process, one SparkSession per module since a
JVM start costs ~10 s; the job is also run as its own spark-submit process where killing it is
the point. The Kafka source jars come from `tools/fetch-jars spark-kafka` (Maven Central, cached
under ~/.cache/rillet), so a fresh CI run fetches them itself.

RILLET_SPARK_TEST_BOOTSTRAP=host:port points the tests at an already running broker (e.g. an
Apache Kafka node, to compare behaviour) instead of starting a rillet broker.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
SPARK_DIR = REPO / "spark"
JOB_SCRIPT = SPARK_DIR / "windowed_counts.py"
if str(SPARK_DIR) not in sys.path:
    sys.path.insert(0, str(SPARK_DIR))

from pyspark.sql import SparkSession  # noqa: E402

from rillet_spark.events import OUTPUT_COLUMNS  # noqa: E402
from rillet_spark.job import JobConfig, start  # noqa: E402
from rillet_spark.produce import create_topic  # noqa: E402
from rillet_spark.session import build_session  # noqa: E402
from tests.harness import BrokerProcess  # noqa: E402

EXTERNAL_BOOTSTRAP_ENV = "RILLET_SPARK_TEST_BOOTSTRAP"
Aggregates = dict[tuple[datetime, str], tuple[int, int, int, int]]


def fetch_kafka_jars() -> Path:
    """The folder of Spark's Kafka source jars; fetched from Maven Central on first use."""
    out = subprocess.run(
        [str(REPO / "tools" / "fetch-jars"), "spark-kafka"],
        check=True, capture_output=True, text=True, timeout=900,
    )
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    return fetch_kafka_jars()


@pytest.fixture(scope="module")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a single rillet node shared by the module's tests.

    Every test uses its own topic, so sharing one broker is safe and saves the start-up.
    """
    external = os.environ.get(EXTERNAL_BOOTSTRAP_ENV)
    if external:
        yield external
        return
    broker = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data").start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def spark(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local[2] session for the module: small shuffles, no UI, driver on 127.0.0.1.

    The JVM is started from a temporary folder: Spark 4 keeps session artifacts under
    ./artifacts of its working directory, which must not be the repository.
    """
    with contextlib.chdir(tmp_path_factory.mktemp("spark-cwd")):
        session = build_session(
            "rillet-spark-tests",
            master="local[2]",
            jars_dir=kafka_jars,
            shuffle_partitions=2,
            conf={"spark.driver.memory": "1g"},
        )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def new_topic(bootstrap: str, partitions: int, prefix: str = "spark") -> str:
    """Create a topic with a fresh name, so tests sharing a broker never see each other's data."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions)
    return name


def job_config(bootstrap: str, topic: str, work: Path, **overrides: object) -> JobConfig:
    """A JobConfig writing under `work`, with short triggers suited to tests."""
    fields: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "topics": topic,
        "output": str(work / "out"),
        "checkpoint": str(work / "checkpoint"),
        "trigger_interval": "1 second",
        "window": "1 minute",
        "watermark": "30 seconds",
    }
    fields.update(overrides)
    return JobConfig(**fields)  # type: ignore[arg-type]


def run_until_done(spark: SparkSession, cfg: JobConfig, timeout: float = 180.0) -> list[dict]:
    """Run an available-now query to its end; return its progress reports (one per batch)."""
    assert cfg.available_now, "only an available-now query ends by itself"
    query = start(spark, cfg)
    try:
        finished = query.awaitTermination(timeout)
        assert finished, f"query still running after {timeout}s: {query.status}"
        return [p for p in query.recentProgress]
    finally:
        query.stop()


def read_aggregates(spark: SparkSession, output: str | Path) -> tuple[Aggregates, int]:
    """The job's output read through the sink's metadata log: ((window, key) -> values, rows).

    Returns the row count beside the dict so callers can see duplicates (rows > len(dict)).
    """
    rows = spark.read.parquet(str(output)).select(*OUTPUT_COLUMNS).collect()
    table: Aggregates = {}
    for r in rows:
        start_utc = r["window_start"].replace(tzinfo=timezone.utc)
        table[(start_utc, r["key"])] = (r["events"], r["amount_sum"], r["amount_min"], r["amount_max"])
    return table, len(rows)


class JobProcess:
    """The job as a user runs it: `spark-submit spark/windowed_counts.py ...`, in its own
    process group so a kill takes the driver JVM and its Python together, like a lost pod."""

    def __init__(self, jars: Path, args: Sequence[str], log_path: Path) -> None:
        spark_submit = Path(sys.executable).parent / "spark-submit"
        jar_list = ",".join(sorted(str(p) for p in jars.glob("*.jar")))
        self.cmd = [
            str(spark_submit), "--master", "local[2]", "--jars", jar_list,
            "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
            "--conf", "spark.sql.shuffle.partitions=2",
            str(JOB_SCRIPT), *args,
        ]
        self.log_path = log_path
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "JobProcess":
        with open(self.log_path, "ab") as log:
            # cwd: Spark leaves ./artifacts in its working directory
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=self.log_path.parent, start_new_session=True)
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group (driver JVM and Python), no shutdown hooks."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"job did not finish in {timeout}s; log:\n{self.log()}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self, tail: int | None = 8000) -> str:
        """The job's output: its last ``tail`` characters (for failure messages), or all of
        it with ``tail=None`` (to search: Spark's INFO lines soon push a line out of a tail)."""
        text = self.log_path.read_text(errors="replace")
        return text if tail is None else text[-tail:]


def batch_ids(checkpoint: Path, log: str) -> set[int]:
    """Batch ids recorded in a checkpoint's `offsets` or `commits` log."""
    folder = checkpoint / log
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def sink_batch_ids(output: Path) -> set[int]:
    """Batch ids the file sink has committed: its `_spark_metadata` log, where every tenth
    batch's file is a compaction named `<id>.compact`."""
    folder = output / "_spark_metadata"
    if not folder.is_dir():
        return set()
    names = (p.name.removesuffix(".compact") for p in folder.iterdir())
    return {int(n) for n in names if n.isdigit()}


def end_offsets(checkpoint: Path, batch_id: int) -> dict[int, int]:
    """Partition -> end offset of one micro-batch, from the checkpoint's offset log.

    The file is a version line, a metadata line (watermark, ...), then one JSON line per source:
    {"topic": {"0": offset, ...}} for the Kafka source.
    """
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    (per_topic,) = json.loads(lines[2]).values()
    return {int(p): off for p, off in per_topic.items()}


