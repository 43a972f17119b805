"""DescribeConfigs values, sources and synonyms, as Apache Kafka 4.3.1 answers them.

The expected lines were recorded from a real Kafka 4.3.1 node (kafka-configs --describe --all)
given the same static settings; tests/integration/test_java_client.py checks the same answers
against a live rillet, and against Kafka itself with RILLET_JAVA_TARGET=kafka.
"""
from __future__ import annotations

from rillet.apis.describe_configs import broker_synonyms, topic_config_entries
from rillet.defs.broker_config import BrokerConfig

# ConfigSource names as kafka-configs prints them.
_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}

STATIC = {"log.retention.minutes": "300", "log.roll.ms": "3600000",
          "log.flush.interval.ms": "1000", "log.segment.delete.delay.ms": "30000",
          "log.retention.bytes": "5000000"}


def _synonyms(entries: list[dict]) -> str:
    return "{" + ", ".join(f"{_SOURCES[s['source']]}:{s['name']}={s['value']}"
                           for s in entries) + "}"


def _lines(config: BrokerConfig, overrides: dict[str, str]) -> dict[str, str]:
    return {e["name"]: f"{e['value']} {_synonyms(e['synonyms'])}"
            for e in topic_config_entries(config, overrides, None, with_synonyms=True)}


def test_topic_defaults_show_kafkas_synonyms():
    lines = _lines(BrokerConfig.load(), {"retention.ms": "3600000"})
    # Kafka drops the synonyms listed before the preferred key: log.retention.ms and
    # log.roll.ms have no default, so retention.ms and segment.ms show none.
    assert lines["retention.ms"] == "3600000 {DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}"
    assert lines["segment.ms"] == "604800000 {}"
    assert lines["flush.ms"] == "9223372036854775807 {}"
    assert lines["file.delete.delay.ms"] == \
        "60000 {DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}"
    assert lines["cleanup.policy"] == "delete {DEFAULT_CONFIG:log.cleanup.policy=delete}"
    assert lines["min.cleanable.dirty.ratio"] == \
        "0.5 {DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}"


def test_topic_synonyms_under_static_broker_settings():
    lines = _lines(BrokerConfig.load(None, STATIC), {})
    assert lines["retention.ms"] == "18000000 {}"  # log.retention.minutes is not log.retention.ms
    assert lines["segment.ms"] == \
        "3600000 {STATIC_BROKER_CONFIG:log.roll.ms=3600000, DEFAULT_CONFIG:log.roll.hours=168}"
    assert lines["flush.ms"] == ("1000 {STATIC_BROKER_CONFIG:log.flush.interval.ms=1000, "
                                 "DEFAULT_CONFIG:log.flush.scheduler.interval.ms="
                                 "9223372036854775807}")
    assert lines["retention.bytes"] == ("5000000 {STATIC_BROKER_CONFIG:log.retention.bytes="
                                        "5000000, DEFAULT_CONFIG:log.retention.bytes=-1}")
    assert lines["file.delete.delay.ms"] == (
        "30000 {STATIC_BROKER_CONFIG:log.segment.delete.delay.ms=30000, "
        "DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}")


def test_a_static_preferred_key_shows_the_unit_default_after_it():
    """Kafka's rule as seen for log.roll.ms above, applied to log.retention.ms."""
    lines = _lines(BrokerConfig.load(None, {"log.retention.ms": "7200000"}), {})
    assert lines["retention.ms"] == ("7200000 {STATIC_BROKER_CONFIG:log.retention.ms=7200000, "
                                     "DEFAULT_CONFIG:log.retention.hours=168}")


def test_broker_synonyms():
    config = BrokerConfig.load(None, STATIC)
    assert _synonyms(broker_synonyms(config, "log.retention.minutes")) == \
        "{STATIC_BROKER_CONFIG:log.retention.minutes=300, DEFAULT_CONFIG:log.retention.hours=168}"
    assert _synonyms(broker_synonyms(config, "log.retention.hours")) == \
        "{DEFAULT_CONFIG:log.retention.hours=168}"
    assert _synonyms(broker_synonyms(config, "log.retention.ms")) == "{}"
    assert _synonyms(broker_synonyms(config, "log.flush.scheduler.interval.ms")) == \
        "{DEFAULT_CONFIG:log.flush.scheduler.interval.ms=9223372036854775807}"
