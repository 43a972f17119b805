"""Spark's Kafka source (local mode) over transactional writes on a real rillet node.

With `kafka.isolation.level=read_committed` the source returns only what committed
transactions wrote, even where an aborted transaction sits between two committed ones in
the same partitions; with the default (read_uncommitted) it returns the aborted records too,
which shows the committed read really filtered something.
"""
from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from tests.integration.spark_support import (  # noqa: F401  (fixtures are used by name)
    kafka_jars,
    new_topic,
    spark,
    spark_broker,
)

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 2
WAIT_S = 30


def transactional_writes(bootstrap: str, topic: str) -> tuple[list[str], list[str]]:
    """Committed, aborted, committed transactions over both partitions (and one
    non-transactional record); what committed, what aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}",
                         "linger.ms": 5})
    producer.init_transactions(WAIT_S)
    committed, aborted = [], []
    for name, commit in (("first", True), ("aborted", False), ("second", True)):
        values = [f"{name}-{i}" for i in range(20)]
        producer.begin_transaction()
        for i, v in enumerate(values):
            producer.produce(topic, v.encode(), partition=i % PARTITIONS)
        # In the log before the transaction ends: abort_transaction drops what is queued.
        assert producer.flush(WAIT_S) == 0
        if commit:
            producer.commit_transaction(WAIT_S)
            committed += values
        else:
            producer.abort_transaction(WAIT_S)
            aborted += values
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"plain", partition=0)
    assert plain.flush(WAIT_S) == 0
    return committed + ["plain"], aborted


def spark_values(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> list[str]:
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("endingOffsets", "latest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return [r["value"].decode() for r in reader.load().select("value").collect()]


def test_spark_read_committed_skips_aborted_transactions(spark: SparkSession,
                                                         spark_broker: str) -> None:
    topic = new_topic(spark_broker, partitions=PARTITIONS, prefix="spark-txn")
    committed, aborted = transactional_writes(spark_broker, topic)

    read = spark_values(spark, spark_broker, topic,
                        **{"kafka.isolation.level": "read_committed"})
    assert Counter(read) == Counter(committed), (
        f"aborted read: {sorted(set(read) & set(aborted))[:5]}, "
        f"missing: {sorted(set(committed) - set(read))[:5]}")
    everything = spark_values(spark, spark_broker, topic)
    assert Counter(everything) == Counter(committed + aborted)
