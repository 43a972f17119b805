"""The PySpark windowed-counts job against a real rillet broker, Spark in local mode.

What a user of the pipeline relies on: exact aggregates over a multi-partition topic; no lost
and no duplicated output when the job is killed and restarted from its checkpoint; events later
than the watermark dropped; a clear error for a missing topic; and Spark's batch Kafka reader
returning every record of an offset range.
"""
from __future__ import annotations

import itertools
import json
import re
import shlex
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from tests.integration.spark_support import (  # noqa: F401  (fixtures are used by name)
    REPO,
    JobProcess,
    batch_ids,
    end_offsets,
    job_config,
    sink_batch_ids,
    kafka_jars,
    new_topic,
    read_aggregates,
    run_until_done,
    spark,
    spark_broker,
)
from tests.polling import poll_until, wait_until
# spark_support put spark/ on sys.path, so the job's package imports from here on
from rillet_spark.job import run  # noqa: E402
from rillet_spark.produce import (  # noqa: E402
    DEFAULT_START,
    Event,
    expected_aggregates,
    flush_event,
    create_topic,
    produce,
    sample_events,
    stream,
    stream_events,
)

pytestmark = pytest.mark.timeout(300)

WINDOW_SECONDS = 60


def test_jar_versions_match_pyspark() -> None:
    """The Kafka source jars, the image and the installed pyspark are the same Spark version:
    the source calls Spark internals, so a mismatch fails at run time in obscure ways."""
    pom = (REPO / "tools/jars/spark-kafka/pom.xml").read_text()
    pom_version = re.search(r"<spark.version>([^<]+)</spark.version>", pom).group(1)
    dockerfile = (REPO / "spark/Dockerfile").read_text()
    image_version = re.search(r"^ARG PYSPARK_VERSION=(\S+)$", dockerfile, re.M).group(1)
    assert pom_version == pyspark.__version__ == image_version
    pinned = re.search(r'"confluent-kafka==([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert re.search(r"^ARG CONFLUENT_KAFKA_VERSION=(\S+)$", dockerfile, re.M).group(1) == pinned


def test_aggregates_are_exact_over_partitions(spark: SparkSession, spark_broker: str, tmp_path: Path) -> None:
    topic = new_topic(spark_broker, partitions=3)
    events = sample_events(900, keys=4, span_seconds=600, seed=11)
    produce(spark_broker, topic, [*events, flush_event(events)], partitions=3)

    cfg = job_config(spark_broker, topic, tmp_path, available_now=True, max_offsets_per_trigger=200)
    progress = run_until_done(spark, cfg)

    assert sum(p["numInputRows"] for p in progress) == len(events) + 1
    assert max(p["numInputRows"] for p in progress) <= 200  # maxOffsetsPerTrigger held
    table, rows = read_aggregates(spark, cfg.output)
    assert table == expected_aggregates(events, WINDOW_SECONDS)  # flush window stays open
    assert rows == len(table)


def test_batch_reader_returns_every_record(spark: SparkSession, spark_broker: str) -> None:
    topic = new_topic(spark_broker, partitions=3)
    events = sample_events(300, keys=3, seed=5)
    produce(spark_broker, topic, events, partitions=3)
    # event i went to partition i % 3, at offset i // 3 (offsets are dense from 0)
    sent = {(i % 3, i // 3): e.to_json().decode() for i, e in enumerate(events)}

    def read(starting: str, ending: str) -> dict[tuple[int, int], str]:
        df = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", spark_broker)
              .option("subscribe", topic)
              .option("startingOffsets", starting)
              .option("endingOffsets", ending)
              .load())
        return {(r["partition"], r["offset"]): r["value"].decode()
                for r in df.select("partition", "offset", "value").collect()}

    everything = read("earliest", "latest")
    assert everything == sent

    starting = json.dumps({topic: {"0": 10, "1": 0, "2": -2}})  # -2 = earliest
    ending = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})    # -1 = latest
    part = read(starting, ending)
    want = {k: v for k, v in sent.items()
            if (k[0] == 0 and 10 <= k[1] < 20) or (k[0] == 1 and k[1] < 5) or k[0] == 2}
    assert part == want


def test_late_events_beyond_watermark_are_dropped(spark: SparkSession, spark_broker: str, tmp_path: Path) -> None:
    topic = new_topic(spark_broker, partitions=2)
    at = lambda seconds: DEFAULT_START + timedelta(seconds=seconds)  # noqa: E731
    on_time = [Event(f"a{i}", "k", 10 + i, at(5 + i)) for i in range(5)]  # window [0, 60)
    ahead = Event("ahead", "k", 1, at(300))  # watermark -> 300 - 30 = 270 s
    produce(spark_broker, topic, [*on_time, ahead], partitions=2)
    cfg = job_config(spark_broker, topic, tmp_path, available_now=True)
    run_until_done(spark, cfg)
    first, _ = read_aggregates(spark, cfg.output)
    assert first == {(at(0), "k"): (5, 60, 10, 14)}

    # Same checkpoint, so the same watermark (270 s): events for [0, 60) are now too late, one
    # for [240, 300) is not; the flush event closes every open window.
    late = [Event(f"late{i}", "k", 1000, at(20 + i)) for i in range(3)]
    in_time = Event("in-time", "k", 7, at(280))
    produce(spark_broker, topic, [*late, in_time, flush_event([ahead])], partitions=2)
    progress = run_until_done(spark, cfg)

    dropped = sum(op.get("numRowsDroppedByWatermark", 0)
                  for p in progress for op in p.get("stateOperators", []))
    # Spark counts rows dropped after partial aggregation, so <= the late events; > 0 is the point.
    assert 0 < dropped <= len(late)
    final, rows = read_aggregates(spark, cfg.output)
    assert final == {(at(0), "k"): (5, 60, 10, 14), (at(240), "k"): (1, 7, 7, 7),
                     (at(300), "k"): (1, 1, 1, 1)}
    assert rows == 3


def test_missing_topic_gives_clear_error(
    spark: SparkSession, spark_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = job_config(spark_broker, "no-such-topic-spark", tmp_path, available_now=True)
    t0 = time.monotonic()
    assert run(spark, cfg) == 1
    err = capsys.readouterr().err
    assert "topic(s) 'no-such-topic-spark' not found" in err, err
    assert time.monotonic() - t0 < 120


def test_kill_and_restart_from_checkpoint_is_exactly_once(
    spark: SparkSession, spark_broker: str, kafka_jars: Path, tmp_path: Path
) -> None:
    topic = new_topic(spark_broker, partitions=3)
    events = sample_events(1000, keys=5, span_seconds=720, seed=23)  # 12 one-minute windows
    produce(spark_broker, topic, [*events, flush_event(events)], partitions=3)
    out, chk = tmp_path / "out", tmp_path / "checkpoint"
    args = ["--bootstrap-servers", spark_broker, "--topics", topic, "--output", str(out),
            "--checkpoint", str(chk), "--max-offsets-per-trigger", "100",
            "--window", "1 minute", "--watermark", "30 seconds", "--trigger-interval", "1 second"]

    # Streaming with a short trigger: kill -9 the driver once a few batches have committed and,
    # if caught within a few seconds, while a batch is planned (offsets logged) but not committed.
    job = JobProcess(kafka_jars, args, tmp_path / "job.log").start()
    try:
        wait_until(lambda: (len(batch_ids(chk, "commits")) >= 2 and "progress: batch" in job.log(tail=None))
                   or not job.alive(), 180, "2 committed batches, reported")
        assert job.alive(), f"job ended early:\n{job.log()}"
        poll_until(lambda: bool(batch_ids(chk, "offsets") - batch_ids(chk, "commits")), 10)
    finally:
        job.kill()
    committed = batch_ids(chk, "commits")
    in_sink = sink_batch_ids(out) - committed   # written by the sink, not yet committed
    # one progress line per finished micro-batch in the driver's output (kubectl logs on k8s)
    reported = {int(b) for b in re.findall(r"^progress: batch (\d+), \d+ input rows", job.log(tail=None),
                                   re.M)}
    assert reported and reported <= committed, (reported, committed)
    consumed = sum(end_offsets(chk, max(committed)).values())
    assert consumed < len(events) + 1, "job drained the topic before the kill; the test proves nothing"

    # Restart on the same checkpoint with the same query and let it drain what is left; this
    # runs in the test's warm session (the killed driver's JVM is gone, so nothing is shared
    # but the checkpoint and output folders, as after a pod restart).
    cfg = job_config(spark_broker, topic, tmp_path, available_now=True, max_offsets_per_trigger=100)
    progress = run_until_done(spark, cfg)
    # resumed after the last committed batch, re-reading exactly what that batch had not
    assert min(p["batchId"] for p in progress) == max(committed) + 1
    # Unless the kill fell between the sink's commit of the next batch and the checkpoint's:
    # that batch is planned again but the sink skips it as already written, so its rows are
    # not read again (exactly once), and not counted as input.
    assert in_sink <= {max(committed) + 1}, (in_sink, committed)
    written = sum(end_offsets(chk, max(in_sink)).values()) if in_sink else consumed
    assert sum(p["numInputRows"] for p in progress) == len(events) + 1 - written

    table, rows = read_aggregates(spark, out)
    assert table == expected_aggregates(events, WINDOW_SECONDS)
    assert rows == len(table), "a window was written twice"


def test_submit_k8s_builds_cluster_mode_command(kafka_jars: Path) -> None:
    """What submit-k8s hands to spark-submit: cluster mode on the given API server, the driver's
    service account, the Kafka jars as local:// paths inside the image, the shared claim."""
    out = subprocess.run(
        [str(REPO / "spark/submit-k8s"), "--master", "k8s://https://127.0.0.1:6443", "--namespace", "jobs",
         "--pvc", "shared", "--dry-run", "--",
         "--bootstrap-servers", "rillet:9092", "--topics", "events", "--output", "/data/out",
         "--checkpoint", "/data/chk"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    argv = shlex.split(out)
    confs = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    assert argv[argv.index("--master") + 1] == "k8s://https://127.0.0.1:6443"
    assert argv[argv.index("--deploy-mode") + 1] == "cluster"
    assert confs["spark.kubernetes.namespace"] == "jobs"
    assert confs["spark.kubernetes.authenticate.driver.serviceAccountName"] == "rillet-spark"
    assert sorted(confs["spark.jars"].split(",")) == sorted(
        f"local:///opt/spark-kafka-jars/{p.name}" for p in kafka_jars.glob("*.jar"))
    for role in ("driver", "executor"):
        prefix = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.data"
        assert confs[f"{prefix}.options.claimName"] == "shared"
        assert confs[f"{prefix}.mount.path"] == "/data"
    main = argv.index("local:///opt/rillet/spark/windowed_counts.py")
    assert argv[main + 1:] == ["--bootstrap-servers", "rillet:9092", "--topics", "events",
                               "--output", "/data/out", "--checkpoint", "/data/chk"]
    # the service account named here is the one the RBAC manifest binds to the driver Role
    rbac = (REPO / "spark/k8s/rbac.yaml").read_text()
    assert "kind: ServiceAccount\nmetadata:\n  name: rillet-spark\n" in rbac


def test_stream_producer_runs_until_its_stop_topic_and_sends_a_known_sequence(spark_broker: str) -> None:
    """The producer the Kubernetes mission runs: paced, idempotent, stopped by a topic appearing;
    what it sent is exactly the first `produced` events of its sequence, each once."""
    from confluent_kafka import Consumer

    topic = new_topic(spark_broker, partitions=3, prefix="stream")
    stop = f"{topic}-stop"
    timer = threading.Timer(3.0, create_topic, (spark_broker, stop, 1))
    timer.start()
    try:
        result = stream(spark_broker, topic, stream_events(4, step_ms=100, seed=5), rate=200,
                        stop_topic=stop, max_seconds=60, report=lambda _line: None)
    finally:
        timer.join()
    assert result.failed == []
    assert 200 < result.produced < 200 * 30, result  # stopped by the topic, not the time limit
    consumer = Consumer({"bootstrap.servers": spark_broker, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < result.produced and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(json.loads(msg.value())["event_id"])
    finally:
        consumer.close()
    expected = [e.event_id for e in itertools.islice(stream_events(4, step_ms=100, seed=5),
                                                      result.produced)]
    assert sorted(seen) == sorted(expected)
