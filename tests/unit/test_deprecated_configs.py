"""Kafka 3.x config names accepted without effect (issue 33): pure checks."""
from __future__ import annotations

import logging

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
