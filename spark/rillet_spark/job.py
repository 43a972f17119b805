"""The streaming job: Kafka topic(s) -> JSON events -> windowed aggregates -> Parquet.

    spark-submit spark/windowed_counts.py --bootstrap-servers 127.0.0.1:9092 --topics events \
        --output /data/out --checkpoint /data/chk [--trigger-interval "10 seconds" | --available-now]

Exactly-once output comes from Spark's file sink with a checkpoint: the source offsets of each
micro-batch are logged before it runs, and the sink records each batch's files in
<output>/_spark_metadata only when the batch commits. A restarted job replays an unfinished batch
over the same offsets, and readers that go through the metadata log (spark.read.parquet on
<output>) never see files of a batch that did not commit. This needs a replayable source (Kafka
offsets), the same checkpoint folder across restarts, and the same query.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from rillet_spark.events import parse_events, windowed_aggregates
from rillet_spark.lag import LagExporter
from rillet_spark.progress import ProgressListener, BatchReporter
from rillet_spark.security import ClientSecurity, SecurityConfigError, kafka_options
from rillet_spark.session import build_session

APP_NAME = "rillet-windowed-counts"


@dataclass(frozen=True)
class JobConfig:
    """Everything the job can be told; defaults suit a small local run."""

    bootstrap_servers: str
    topics: str
    output: str
    checkpoint: str
    starting_offsets: str = "earliest"
    trigger_interval: str = "10 seconds"
    available_now: bool = False
    max_offsets_per_trigger: int | None = None
    window: str = "1 minute"
    watermark: str = "30 seconds"
    fail_on_data_loss: bool = True
    timeout_seconds: float | None = None
    # Extra consumer settings, passed to the Kafka source as kafka.<name> options.
    kafka_options: dict[str, str] = field(default_factory=dict)
    # A mounted User Secret and cluster CA (rillet_spark.security); plaintext when unset.
    security: ClientSecurity = field(default_factory=ClientSecurity)
    # Serve the lag gauges (rillet_spark.lag) on this port; None: not served.
    metrics_port: int | None = None
    metrics_address: str = "0.0.0.0"


def parse_args(argv: Sequence[str]) -> tuple[JobConfig, argparse.Namespace]:
    """Command line -> JobConfig, plus the session-level options (master, jars, partitions)."""
    p = argparse.ArgumentParser(prog="windowed_counts", description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    p.add_argument("--topics", required=True, help="topic or comma-separated topics to subscribe to")
    p.add_argument("--output", required=True, help="Parquet output folder (file sink)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder; keep it across restarts")
    p.add_argument("--starting-offsets", default="earliest",
                   help='earliest | latest | per-partition JSON; only used on the first start')
    p.add_argument("--trigger-interval", default="10 seconds", help='micro-batch interval, e.g. "5 seconds"')
    p.add_argument("--available-now", action="store_true",
                   help="process everything available now (in batches of --max-offsets-per-trigger) and stop")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None,
                   help="cap on records per micro-batch, over all partitions")
    p.add_argument("--window", default="1 minute", help='tumbling event-time window, e.g. "1 minute"')
    p.add_argument("--watermark", default="30 seconds", help='allowed lateness, e.g. "30 seconds"')
    p.add_argument("--no-fail-on-data-loss", action="store_true",
                   help="carry on when offsets were deleted by retention (default: fail)")
    p.add_argument("--timeout", type=float, default=None, help="stop the query after this many seconds")
    p.add_argument("--kafka-option", action="append", default=[], metavar="NAME=VALUE",
                   help="consumer setting passed as kafka.NAME (repeatable)")
    p.add_argument("--user-secret-dir", default=None, metavar="DIR",
                   help="a rillet User's Secret mounted as a folder: SASL_SSL (SCRAM-SHA-512) or "
                        "mutual TLS, whichever the User has")
    p.add_argument("--ca-file", default=None, metavar="FILE",
                   help="the Cluster's CA certificate (ca.crt of <cluster>-cluster-ca-cert) for TLS")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics of the job's lag on this port")
    p.add_argument("--metrics-address", default="0.0.0.0",
                   help="address the metrics port listens on (default: every interface, as in a pod)")
    p.add_argument("--master", default=None, help="Spark master; default: what spark-submit set")
    p.add_argument("--jars-dir", default=None,
                   help="folder with the Kafka source jars (default: $RILLET_SPARK_KAFKA_JARS or spark.jars)")
    p.add_argument("--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions")
    args = p.parse_args(list(argv))
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger <= 0:
        p.error("--max-offsets-per-trigger must be positive")
    cfg = JobConfig(
        bootstrap_servers=args.bootstrap_servers,
        topics=args.topics,
        output=args.output,
        checkpoint=args.checkpoint,
        starting_offsets=args.starting_offsets,
        trigger_interval=args.trigger_interval,
        available_now=args.available_now,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        window=args.window,
        watermark=args.watermark,
        fail_on_data_loss=not args.no_fail_on_data_loss,
        timeout_seconds=args.timeout,
        kafka_options=_pairs(p, args.kafka_option),
        security=ClientSecurity(
            user_dir=Path(args.user_secret_dir) if args.user_secret_dir else None,
            ca_file=Path(args.ca_file) if args.ca_file else None),
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
    )
    try:
        kafka_options(cfg.security)
    except SecurityConfigError as exc:
        p.error(str(exc))
    return cfg, args


def _pairs(p: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            p.error(f"--kafka-option wants NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def read_kafka(spark: SparkSession, cfg: JobConfig) -> DataFrame:
    """The streaming Kafka source. Spark assigns partitions itself: no consumer group is used."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
        .option("subscribe", cfg.topics)
        .option("startingOffsets", cfg.starting_offsets)
        .option("failOnDataLoss", str(cfg.fail_on_data_loss).lower())
    )
    if cfg.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    # Explicit --kafka-option settings win over those derived from the mounted Secret.
    for name, value in {**kafka_options(cfg.security), **cfg.kafka_options}.items():
        reader = reader.option(f"kafka.{name}", value)
    return reader.load()


def start(spark: SparkSession, cfg: JobConfig) -> StreamingQuery:
    """Build the pipeline and start it; the caller waits on (or stops) the returned query."""
    aggregates = windowed_aggregates(parse_events(read_kafka(spark, cfg)), cfg.window, cfg.watermark)
    writer = (
        aggregates.writeStream.format("parquet")
        .outputMode("append")  # the only mode a file sink takes: each window written once, final
        .option("path", cfg.output)
        .option("checkpointLocation", cfg.checkpoint)
        .queryName(APP_NAME.replace("-", "_"))
    )
    if cfg.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=cfg.trigger_interval)
    return writer.start()


def explain_failure(exc: BaseException, cfg: JobConfig) -> str:
    """One line a person can act on; Spark's own text follows it in the log."""
    text = str(exc)
    if "TopicAuthorizationException" in text or "Not authorized to access topics" in text:
        return (f"not authorized to read topic(s) {cfg.topics!r}: the User needs the Read "
                f"(and Describe) ACL on them")
    if "SaslAuthenticationException" in text or "Authentication failed" in text:
        return "authentication failed: check the mounted User Secret and that the User exists"
    if "UnknownTopicOrPartition" in text or "does not host this topic" in text:
        return f"topic(s) {cfg.topics!r} not found on {cfg.bootstrap_servers}: create them first"
    return f"streaming query failed: {text.splitlines()[0] if text else type(exc).__name__}"


def run(spark: SparkSession, cfg: JobConfig) -> int:
    """Run until the query ends (available-now), the timeout passes, or it fails; one progress
    line per micro-batch on stdout (what `kubectl logs` of a driver pod shows)."""
    lag = LagExporter.create()
    if cfg.metrics_port is not None:
        lag.serve(cfg.metrics_port, cfg.metrics_address)
    reporter = BatchReporter(lag)
    listener = ProgressListener(reporter)
    spark.streams.addListener(listener)
    try:
        query = start(spark, cfg)
        deadline = None if cfg.timeout_seconds is None else time.monotonic() + cfg.timeout_seconds
        try:
            while not query.awaitTermination(1):
                if deadline is not None and time.monotonic() >= deadline:
                    query.stop()
                    break
        except StreamingQueryException as exc:
            print(f"windowed_counts: {explain_failure(exc, cfg)}", file=sys.stderr)
            return 1
        finally:
            # Listener events are delivered asynchronously: a batch that ended just before the
            # query may not have reached the listener yet; its report is in recentProgress.
            reporter.report(query.recentProgress)
        return 0
    finally:
        spark.streams.removeListener(listener)


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = build_session(
        APP_NAME, master=args.master, jars_dir=args.jars_dir, shuffle_partitions=args.shuffle_partitions
    )
    try:
        return run(spark, cfg)
    finally:
        spark.stop()
