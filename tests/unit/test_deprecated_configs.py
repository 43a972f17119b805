"""Kafka 3.x config names accepted without effect (issue 33): pure checks."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rillet.defs.config_error import ConfigError
from rillet.dynamic_config import validate_dynamic
from rillet.protocol import errors
from rillet.defs.topic_defs import validate_topic_configs


def test_message_format_version_is_kept_and_logged_as_without_effect(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        out = validate_topic_configs({"message.format.version": "2.8-IV1",
                                      "retention.ms": "1000"})
    assert out == {"message.format.version": "2.8-IV1", "retention.ms": "1000"}
    assert "message.format.version=2.8-IV1 accepted" in caplog.text
    assert "no effect" in caplog.text


def test_a_deprecated_topic_name_still_needs_a_well_formed_value() -> None:
    with pytest.raises(ConfigError, match="message.downconversion.enable"):
        validate_topic_configs({"message.downconversion.enable": "perhaps"})
    with pytest.raises(ConfigError, match="needs a value"):
        validate_topic_configs({"message.format.version": None})


def test_unknown_topic_names_are_still_refused() -> None:
    with pytest.raises(ConfigError, match="unknown topic config"):
        validate_topic_configs({"message.format.versions": "3.0"})


def test_kerberos_relogin_is_a_dynamic_broker_config_without_effect(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        validate_dynamic({"sasl.kerberos.min.time.before.relogin": "60000",
                          "log.retention.ms": "1000"})
    assert "sasl.kerberos.min.time.before.relogin=60000 accepted" in caplog.text
    validate_dynamic({"sasl.kerberos.min.time.before.relogin": None})   # deleting it


def test_a_malformed_deprecated_dynamic_value_is_invalid_config() -> None:
    with pytest.raises(errors.InvalidConfig, match="min.time.before.relogin"):
        validate_dynamic({"sasl.kerberos.min.time.before.relogin": "soon"})
    with pytest.raises(errors.InvalidRequest):
        validate_dynamic({"sasl.kerberos.nonsense": "1"})


def test_a_kept_kafka_3_name_is_described_as_set_so_a_reconciler_sees_no_change(
        caplog: pytest.LogCaptureFixture) -> None:
    """The operator compares a Topic's spec with DescribeConfigs' DYNAMIC_TOPIC entries: a
    kept name left out of them looked like a change on every pass (an alter, an Event and a
    WARNING every interval)."""
    from rillet.apis.describe_configs import topic_config_entries
    from rillet.defs.broker_config import BrokerConfig
    from rillet.topic_config import DYNAMIC_TOPIC

    overrides = {"message.format.version": "2.8-IV1", "retention.ms": "1000"}
    entries = {e["name"]: e for e in topic_config_entries(BrokerConfig.load(), overrides, None)}
    kept = entries["message.format.version"]
    assert (kept["value"], kept["config_source"]) == ("2.8-IV1", DYNAMIC_TOPIC)
    assert "message.downconversion.enable" not in entries   # only what was set
    asked = topic_config_entries(BrokerConfig.load(), overrides, ["retention.ms"])
    assert [e["name"] for e in asked] == ["retention.ms"]
    # Checking a spec again (the operator's every pass) logs nothing.
    with caplog.at_level(logging.WARNING):
        validate_topic_configs(overrides, announce=False)
    assert "accepted" not in caplog.text


def test_timestamp_difference_is_a_topic_config_without_effect_checked_as_in_kafka(
        caplog: pytest.LogCaptureFixture) -> None:
    """Deprecated in Kafka 3.6 (KIP-937): still a long >= 0."""
    with caplog.at_level(logging.WARNING):
        out = validate_topic_configs({"message.timestamp.difference.max.ms": "3600000"})
    assert out == {"message.timestamp.difference.max.ms": "3600000"}
    assert "message.timestamp.difference.max.ms=3600000 accepted" in caplog.text
    for bad in ("-1", "an hour"):
        with pytest.raises(ConfigError, match="message.timestamp.difference.max.ms"):
            validate_topic_configs({"message.timestamp.difference.max.ms": bad})


def test_timestamp_difference_is_a_dynamic_broker_config_without_effect(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        validate_dynamic({"log.message.timestamp.difference.max.ms": "60000"})
    assert "log.message.timestamp.difference.max.ms=60000 accepted" in caplog.text
    with pytest.raises(errors.InvalidConfig, match="timestamp.difference"):
        validate_dynamic({"log.message.timestamp.difference.max.ms": "-5"})


@pytest.mark.parametrize("value,ok", [
    ("2.8", True), ("2.8-IV1", True), ("3.0-IV1", True), ("0.10.2", True), ("0.10.0.1", True),
    ("2.8.1", True), ("1.0", True), ("3.9", True),
    ("9.9", False), ("2", False), ("2.8-beta", False), ("latest", False), ("0.10", False)])
def test_message_format_version_takes_what_kafka_3x_took(value: str, ok: bool) -> None:
    from rillet.defs.deprecated_configs import kafka_version
    assert kafka_version(value) is ok
    if ok:
        assert validate_topic_configs({"message.format.version": value}, announce=False)
    else:
        with pytest.raises(ConfigError, match="message.format.version must be a Kafka release"):
            validate_topic_configs({"message.format.version": value}, announce=False)


STATIC_KAFKA_3X = {
    "log.message.format.version": "2.8",
    "log.message.downconversion.enable": "true",
    "log.message.timestamp.difference.max.ms": "9223372036854775807",
    "sasl.kerberos.min.time.before.relogin": "60000",
    "sasl.kerberos.service.name": "kafka",
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
    "sasl.kerberos.ticket.renew.jitter": "0.05",
    "sasl.kerberos.ticket.renew.window.factor": "0.8",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
}


def test_a_server_properties_with_kafka_3x_names_loads_and_start_up_logs_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Regression (issue 33 audit): a 3.x server.properties carrying these failed start-up
    with "unknown config"; each is kept apart, not an explicit rillet setting, and logged."""
    from rillet.cli import _log_what_has_no_effect
    from rillet.defs.broker_config import BrokerConfig
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in STATIC_KAFKA_3X.items())
                     + "num.partitions=2\n")
    config = BrokerConfig.load(props)
    assert config.no_effect == STATIC_KAFKA_3X
    assert config["num.partitions"] == 2
    assert not any(config.is_explicit(k) for k in STATIC_KAFKA_3X)
    assert config.ignored_keys() == []
    with caplog.at_level(logging.WARNING):
        _log_what_has_no_effect(config)
    for key, value in STATIC_KAFKA_3X.items():
        assert f"broker config {key}={value} accepted (a Kafka 3.x name) but has no effect" \
            in caplog.text


@pytest.mark.parametrize("key,value", [
    ("log.message.format.version", "99.1"),
    ("log.message.timestamp.difference.max.ms", "-1"),
    ("sasl.kerberos.min.time.before.relogin", "soon"),
    ("sasl.kerberos.ticket.renew.jitter", "a bit"),
    ("log.message.downconversion.enable", "perhaps"),
])
def test_a_static_kafka_3x_name_with_a_bad_value_is_a_config_error(key: str, value: str) -> None:
    from rillet.defs.broker_config import BrokerConfig
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.load(overrides={key: value})


def test_unknown_static_names_are_still_refused() -> None:
    from rillet.defs.broker_config import BrokerConfig
    with pytest.raises(ConfigError, match="unknown config 'sasl.kerberos.nonsense'"):
        BrokerConfig.load(overrides={"sasl.kerberos.nonsense": "1"})
