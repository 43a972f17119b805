"""LogConfig: the per-topic settings a partition log obeys, with Kafka's defaults."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

NEVER = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    """Per-topic log settings with Kafka's defaults (topic config names in the comments)."""

    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 604800000  # retention.ms (-1: infinite)
    retention_bytes: int = -1  # retention.bytes (-1: infinite)
    flush_messages: int = NEVER  # flush.messages
    flush_ms: int = NEVER  # flush.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    cleanup_policy: str = "delete"  # cleanup.policy
    max_message_bytes: int = 1048588  # max.message.bytes
    segment_index_bytes: int = 10485760  # segment.index.bytes
    producer_id_expiration_ms: int = 86400000  # producer.id.expiration.ms (a broker config in Kafka)

    @classmethod
    def from_properties(cls, props: Mapping[str, object], base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka topic config names ("segment.bytes": "1024", ...); unknown keys ignored."""
        base = base or cls()
        changes: dict[str, object] = {}
        for f in fields(cls):
            key = f.name.replace("_", ".")
            if key in props and props[key] is not None:
                value = props[key]
                changes[f.name] = str(value) if f.type == "str" else int(str(value))
        return replace(base, **changes)
