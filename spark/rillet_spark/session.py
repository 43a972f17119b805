"""The SparkSession for the job, with Spark's Kafka source jars passed through spark.jars.

The jars (spark-sql-kafka-0-10, spark-token-provider-kafka-0-10, kafka-clients, commons-pool2)
are not part of pyspark; `tools/fetch-jars spark-kafka` puts them in a cache folder, and the
folder is given here (argument, or RILLET_SPARK_KAFKA_JARS). Under spark-submit the jars may
come from --jars / spark.jars instead; then no folder is needed.
"""
from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

JARS_ENV = "RILLET_SPARK_KAFKA_JARS"


def kafka_jars(folder: str | os.PathLike[str]) -> list[str]:
    """Every jar in `folder`, sorted so spark.jars is stable from run to run."""
    jars = sorted(str(p) for p in Path(folder).glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no jars in {folder}: run tools/fetch-jars spark-kafka")
    return jars


def _loopback_only(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Keep a local-mode driver on 127.0.0.1.

    Spark otherwise picks the first non-loopback interface when the host name resolves to
    loopback, and its driver, block manager and UI would listen there. SPARK_LOCAL_IP is read by
    the JVM that getOrCreate() starts as a child process, so setting it here is in time.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        builder.config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )


def build_session(
    app_name: str,
    *,
    master: str | None = None,
    jars_dir: str | os.PathLike[str] | None = None,
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the session. Options left as None keep what spark-submit configured.

    Times are UTC so window boundaries do not depend on the machine's zone.
    """
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        builder = _loopback_only(builder)
    jars_dir = jars_dir or os.environ.get(JARS_ENV)
    if jars_dir:
        builder = builder.config("spark.jars", ",".join(kafka_jars(jars_dir)))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
