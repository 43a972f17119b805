"""The event format and the windowed aggregation, as pure DataFrame transformations.

An event is one Kafka record whose value is a JSON object:

    {"event_id": "e-17", "key": "sensor-3", "amount": 42, "event_time": "2026-01-01T00:00:05Z"}

`amount` is an integer so sums are exact; `event_time` is ISO 8601 (read in the session time
zone, UTC in this job, when it carries no offset). Records whose value is not such an object
(bad JSON, a missing key or time) are dropped before aggregation: a stream must not stop on
one bad record, and a null key or time cannot be placed in a window anyway.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType(), nullable=True),
        StructField("key", StringType(), nullable=True),
        StructField("amount", LongType(), nullable=True),
        StructField("event_time", TimestampType(), nullable=True),
    ]
)

# The columns of the job's output, in order; tests and the demo read them by these names.
OUTPUT_COLUMNS = ("window_start", "window_end", "key", "events", "amount_sum", "amount_min", "amount_max")


def parse_events(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows (key, value bytes, topic, partition, offset, ...) -> typed events.

    The Kafka coordinates are kept beside the event fields: they make a record traceable
    and let tests check that every record was read exactly once.
    """
    parsed = kafka_rows.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
    )
    return parsed.select("e.*", "topic", "partition", "offset").where(
        F.col("key").isNotNull() & F.col("event_time").isNotNull()
    )


def windowed_aggregates(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per key and tumbling event-time window: count and amount sum/min/max.

    The watermark lets Spark finalize a window once the largest event time seen has moved
    `watermark` past the window's end; in append mode each window is then written once and its
    state dropped, and events arriving later for it are dropped (Spark's documented semantics).
    """
    bucket: Column = F.window(F.col("event_time"), window)
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(bucket.alias("w"), F.col("key"))
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum("amount").alias("amount_sum"),
            F.min("amount").alias("amount_min"),
            F.max("amount").alias("amount_max"),
        )
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            *OUTPUT_COLUMNS[2:],
        )
    )
