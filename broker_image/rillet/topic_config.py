"""Topic-level configs: names, types, Kafka defaults via their broker synonyms.

A topic's effective value is its own override when set, else the broker's
synonym, else the Kafka default. DescribeConfigs reports which one applied.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .config import BrokerConfig, ConfigDef, ConfigError, parse_value
from .storage.log import LogConfig


@dataclass(frozen=True)
class TopicConfigDef:
    definition: ConfigDef
    synonym: str | None                       # broker config key
    broker_value: Callable[[BrokerConfig], Any]


def _from(key: str) -> Callable[[BrokerConfig], Any]:
    return lambda c: c[key]


def _cleanup_ok(v: list[str]) -> bool:
    return bool(v) and all(p in ("delete", "compact") for p in v)


_DEFS = [
    TopicConfigDef(ConfigDef("cleanup.policy", "list", ["delete"], check=_cleanup_ok,
                             check_doc="delete, compact or both"),
                   "log.cleanup.policy", _from("log.cleanup.policy")),
    TopicConfigDef(ConfigDef("retention.ms", "long", 604800000, check=lambda v: v >= -1,
                             check_doc=">= -1"),
                   "log.retention.ms", lambda c: c.retention_ms),
    TopicConfigDef(ConfigDef("retention.bytes", "long", -1, check=lambda v: v >= -1,
                             check_doc=">= -1"),
                   "log.retention.bytes", _from("log.retention.bytes")),
    TopicConfigDef(ConfigDef("segment.bytes", "int", 1073741824, check=lambda v: v >= 14,
                             check_doc=">= 14"),
                   "log.segment.bytes", _from("log.segment.bytes")),
    TopicConfigDef(ConfigDef("segment.ms", "long", 604800000, check=lambda v: v >= 1,
                             check_doc=">= 1"),
                   "log.roll.ms", lambda c: c.roll_ms),
    TopicConfigDef(ConfigDef("max.message.bytes", "int", 1048588, check=lambda v: v >= 0,
                             check_doc=">= 0"),
                   "message.max.bytes", _from("message.max.bytes")),
    TopicConfigDef(ConfigDef("min.insync.replicas", "int", 1, check=lambda v: v >= 1,
                             check_doc=">= 1"),
                   "min.insync.replicas", _from("min.insync.replicas")),
    TopicConfigDef(ConfigDef("message.timestamp.type", "string", "CreateTime",
                             check=lambda v: v in ("CreateTime", "LogAppendTime"),
                             check_doc="CreateTime or LogAppendTime"),
                   "log.message.timestamp.type", _from("log.message.timestamp.type")),
    TopicConfigDef(ConfigDef("flush.messages", "long", 2**63 - 1, check=lambda v: v >= 1,
                             check_doc=">= 1"),
                   "log.flush.interval.messages", _from("log.flush.interval.messages")),
    TopicConfigDef(ConfigDef("flush.ms", "long", 2**63 - 1, check=lambda v: v >= 0,
                             check_doc=">= 0"),
                   "log.flush.interval.ms", lambda c: c.flush_ms),
    TopicConfigDef(ConfigDef("delete.retention.ms", "long", 86400000, check=lambda v: v >= 0,
                             check_doc=">= 0"),
                   "log.cleaner.delete.retention.ms", _from("log.cleaner.delete.retention.ms")),
    TopicConfigDef(ConfigDef("min.compaction.lag.ms", "long", 0),
                   "log.cleaner.min.compaction.lag.ms", _from("log.cleaner.min.compaction.lag.ms")),
    TopicConfigDef(ConfigDef("max.compaction.lag.ms", "long", 2**63 - 1),
                   "log.cleaner.max.compaction.lag.ms", _from("log.cleaner.max.compaction.lag.ms")),
    TopicConfigDef(ConfigDef("min.cleanable.dirty.ratio", "double", 0.5),
                   "log.cleaner.min.cleanable.ratio", _from("log.cleaner.min.cleanable.ratio")),
    TopicConfigDef(ConfigDef("compression.type", "string", "producer",
                             check=lambda v: v in ("producer", "uncompressed", "gzip", "snappy",
                                                   "lz4", "zstd"),
                             check_doc="producer, uncompressed, gzip, snappy, lz4 or zstd"),
                   "compression.type", _from("compression.type")),
    TopicConfigDef(ConfigDef("unclean.leader.election.enable", "bool", False),
                   "unclean.leader.election.enable", _from("unclean.leader.election.enable")),
    TopicConfigDef(ConfigDef("index.interval.bytes", "int", 4096, check=lambda v: v >= 0,
                             check_doc=">= 0"),
                   "log.index.interval.bytes", _from("log.index.interval.bytes")),
    TopicConfigDef(ConfigDef("segment.index.bytes", "int", 10485760, check=lambda v: v >= 4,
                             check_doc=">= 4"),
                   "log.index.size.max.bytes", _from("log.index.size.max.bytes")),
    TopicConfigDef(ConfigDef("file.delete.delay.ms", "long", 60000), None, lambda c: 60000),
]

TOPIC_DEFS: dict[str, TopicConfigDef] = {d.definition.name: d for d in _DEFS}


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Checked overrides as strings; raises ConfigError naming the bad key."""
    out = {}
    for key, value in configs.items():
        d = TOPIC_DEFS.get(key)
        if d is None:
            raise ConfigError(f"unknown topic config {key!r}")
        if value is None:
            raise ConfigError(f"topic config {key!r} needs a value")
        parse_value(d.definition, value)
        out[key] = value
    return out


# DescribeConfigs config sources (Kafka's ConfigSource ids).
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5


def effective(broker: BrokerConfig, overrides: Mapping[str, str], key: str) -> tuple[Any, int]:
    """(typed value, config source) of a topic config.

    Config sources as DescribeConfigs reports them.
    """
    d = TOPIC_DEFS[key]
    if key in overrides:
        return parse_value(d.definition, overrides[key]), DYNAMIC_TOPIC
    value = d.broker_value(broker)
    return value, broker_source(broker, d.synonym)


def broker_source(broker: BrokerConfig, name: str | None) -> int:
    """STATIC_BROKER when server.properties / --set gave ``name``, else DEFAULT."""
    return STATIC_BROKER if name and broker.is_explicit(name) else DEFAULT


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


__all__ = ["TOPIC_DEFS", "validate_topic_configs", "effective", "render", "log_config",
           "ConfigError"]
