"""Topic-level config definitions: names, kinds and checks via their broker synonyms, and the
validation of a topic's overrides (`validate_topic_configs`).

Shared by the broker (CreateTopics, AlterConfigs) and the operator (a Topic's spec.config), so
both refuse the same overrides. A few topic configs have no broker synonym (the replication
throttle lists): their default is their own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from .broker_config import BrokerConfig
from .broker_defs import BROKER_DEFS, ConfigDef, parse_value
from .config_error import ConfigError
from .deprecated_configs import TOPIC_NO_EFFECT, check_no_effect


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic config and the broker config its default comes from."""
    definition: ConfigDef
    synonym: str | None                       # broker config key (None: no synonym)
    broker_value: Callable[[BrokerConfig], Any]


def _topic(name: str, synonym: str,
           broker_value: Callable[[BrokerConfig], Any] | None = None) -> TopicConfigDef:
    """A topic config typed and checked exactly like its broker synonym."""
    return TopicConfigDef(replace(BROKER_DEFS[synonym], name=name), synonym,
                          broker_value or (lambda c: c[synonym]))


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _throttled_replicas(v: list[str]) -> bool:
    return v == ["*"] or all(_REPLICA.fullmatch(item) for item in v)


def _throttle_list(name: str, side: str) -> TopicConfigDef:
    """leader/follower.replication.throttled.replicas (KIP-73): "partition:broker" pairs
    whose replication is throttled on that side, or "*" for every replica."""
    d = ConfigDef(name, "list", [], f"replicas throttled on the {side} side", _throttled_replicas,
                  "the literal '*' or a list of replicas as "
                  "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return TopicConfigDef(d, None, lambda c: [])


_DEFS = [
    _topic("cleanup.policy", "log.cleanup.policy"),
    # These synonyms have unit variants (hours/minutes): the broker resolves them.
    _topic("retention.ms", "log.retention.ms", lambda c: c.retention_ms),
    _topic("segment.ms", "log.roll.ms", lambda c: c.roll_ms),
    _topic("flush.ms", "log.flush.interval.ms", lambda c: c.flush_ms),
    _topic("retention.bytes", "log.retention.bytes"),
    _topic("segment.bytes", "log.segment.bytes"),
    _topic("max.message.bytes", "message.max.bytes"),
    _topic("min.insync.replicas", "min.insync.replicas"),
    _topic("message.timestamp.type", "log.message.timestamp.type"),
    _topic("flush.messages", "log.flush.interval.messages"),
    _topic("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    _topic("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
    _topic("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
    _topic("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
    _topic("compression.type", "compression.type"),
    _topic("unclean.leader.election.enable", "unclean.leader.election.enable"),
    _topic("index.interval.bytes", "log.index.interval.bytes"),
    _topic("segment.index.bytes", "log.index.size.max.bytes"),
    _topic("file.delete.delay.ms", "log.segment.delete.delay.ms"),
    _throttle_list("leader.replication.throttled.replicas", "leader"),
    _throttle_list("follower.replication.throttled.replicas", "follower"),
]

TOPIC_DEFS: dict[str, TopicConfigDef] = {d.definition.name: d for d in _DEFS}


def topic_value(broker: BrokerConfig, overrides: Mapping[str, str], key: str) -> Any:
    """The typed value of topic config `key`: the topic's override, else the broker's
    synonym (its default included)."""
    d = TOPIC_DEFS[key]
    if key in overrides:
        return parse_value(d.definition, overrides[key])
    return d.broker_value(broker)


def validate_topic_configs(configs: dict[str, str | None],
                           announce: bool = True) -> dict[str, str]:
    """Checked overrides as strings; raises one ConfigError naming every bad key (a user
    fixing a spec sees them all at once). `announce`: log a Kafka 3.x name's acceptance (the
    broker does; a caller checking a spec on every pass, the operator, does not)."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for key, value in configs.items():
        try:
            out[key] = _checked(key, value, announce)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return out


def _checked(key: str, value: str | None, announce: bool) -> str:
    d = TOPIC_DEFS.get(key)
    if value is None and (d is not None or key in TOPIC_NO_EFFECT):
        raise ConfigError(f"topic config {key!r} needs a value")
    if d is None:
        # A Kafka 3.x name: kept as given (and described as set), no effect.
        if value is not None and check_no_effect(TOPIC_NO_EFFECT, "topic", key, value, announce):
            return value
        raise ConfigError(f"unknown topic config {key!r}")
    parse_value(d.definition, value)
    return value
