"""How far behind the log end the job is, per partition, as Prometheus metrics.

Spark's Kafka source assigns partitions itself and never commits offsets to Kafka, so the
broker's consumer-lag metric knows nothing of the job. Each micro-batch's progress says where
the batch ended (`endOffset`) and what the latest offsets were when it was planned
(`latestOffset`); the difference is the records the job has yet to read. With
maxOffsetsPerTrigger below the incoming rate it grows; once the job catches up it is 0.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from prometheus_client import CollectorRegistry, Gauge, start_http_server

Partition = tuple[str, int]


def source_offset(value: Any) -> Mapping[str, Any] | None:
    """A source offset as progress carries it ('{"topic": {"0": 12}}' text or a dict), or None.

    Not every batch knows both ends: the first batch after a restart from a checkpoint carries
    no latestOffset, which PySpark hands over as "None" (or "null", or empty). That is
    "unknown", never an error: the gauges and progress lines are an aid, and a failure here
    would stop the query's driver (or, in a listener, silently drop the batch's line)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, Mapping) else None


def _offsets(value: Any) -> dict[Partition, int]:
    parsed = source_offset(value) or {}
    return {(topic, int(p)): int(off) for topic, parts in parsed.items()
            if isinstance(parts, Mapping) for p, off in parts.items()}


def offsets_behind(progress: Mapping[str, Any]) -> dict[Partition, int]:
    """Per partition: records between the batch's end and the latest offset Spark saw."""
    behind: dict[Partition, int] = {}
    for source in progress.get("sources") or ():
        end = _offsets(source.get("endOffset"))
        latest = _offsets(source.get("latestOffset"))
        for tp, latest_offset in latest.items():
            behind[tp] = max(0, latest_offset - end.get(tp, latest_offset))
    return behind


@dataclass
class LagExporter:
    """The gauges, served on their own registry (nothing else of the process is exposed)."""

    registry: CollectorRegistry
    per_partition: Gauge
    total: Gauge
    batch: Gauge

    @classmethod
    def create(cls) -> "LagExporter":
        registry = CollectorRegistry()
        return cls(
            registry=registry,
            per_partition=Gauge("rillet_spark_offsets_behind_latest",
                                "Records of a partition the job has not read yet",
                                ["topic", "partition"], registry=registry),
            total=Gauge("rillet_spark_offsets_behind_latest_total",
                        "Records of all partitions the job has not read yet", registry=registry),
            batch=Gauge("rillet_spark_last_batch_id", "The last completed micro-batch",
                        registry=registry),
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def observe(self, progress: Mapping[str, Any]) -> dict[Partition, int]:
        behind = offsets_behind(progress)
        for (topic, partition), n in behind.items():
            self.per_partition.labels(topic=topic, partition=str(partition)).set(n)
        self.total.set(sum(behind.values()))
        self.batch.set(progress.get("batchId", -1))
        return behind
