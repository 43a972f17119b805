"""Topic-level configs as the broker applies them: effective values via broker synonyms.

The definitions and the validation of overrides are defs/topic_defs.py's (shared with the
operator).

A topic's effective value is its own override when set, else the broker's
synonym (dynamic or static), else the Kafka default. DescribeConfigs reports
which one applied. A few topic configs have no broker synonym (the replication
throttle lists): their default is their own.
"""
from __future__ import annotations

from typing import Any, Mapping

from .defs.broker_config import BrokerConfig
from .defs.topic_defs import TOPIC_DEFS, topic_value
from .storage.log_config import LogConfig

# DescribeConfigs config sources (Kafka's ConfigSource ids).
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5


def effective(broker: BrokerConfig, overrides: Mapping[str, str], key: str) -> tuple[Any, int]:
    """(typed value, config source) of a topic config.

    Config sources as DescribeConfigs reports them.
    """
    value = topic_value(broker, overrides, key)
    if key in overrides:
        return value, DYNAMIC_TOPIC
    return value, broker_source(broker, TOPIC_DEFS[key].synonym)


def broker_source(broker: BrokerConfig, name: str | None) -> int:
    """Where the broker's ``name`` comes from: dynamic (per broker / cluster default),
    STATIC_BROKER when server.properties / --set gave it, else DEFAULT."""
    return broker.source_of(name) if name else DEFAULT


def render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def log_config(broker: BrokerConfig, overrides: dict[str, str]) -> LogConfig:
    def v(key: str) -> Any:
        return effective(broker, overrides, key)[0]
    return LogConfig(
        segment_bytes=v("segment.bytes"),
        segment_ms=v("segment.ms"),
        index_interval_bytes=v("index.interval.bytes"),
        retention_ms=v("retention.ms"),
        retention_bytes=v("retention.bytes"),
        flush_messages=v("flush.messages"),
        flush_ms=v("flush.ms"),
        message_timestamp_type=v("message.timestamp.type"),
        cleanup_policy=",".join(v("cleanup.policy")),
        max_message_bytes=v("max.message.bytes"),
        segment_index_bytes=v("segment.index.bytes"),
    )


__all__ = ["effective", "broker_source", "render", "log_config"]
