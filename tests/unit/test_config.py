from pathlib import Path

import pytest

from rillet.config import BROKER_DEFS, BrokerConfig, ConfigError
from rillet.topic_config import effective, log_config, validate_topic_configs


def test_defaults_are_kafkas():
    c = BrokerConfig.load()
    assert c["num.partitions"] == 1
    assert c["message.max.bytes"] == 1048588
    assert c.retention_ms == 168 * 3600 * 1000
    assert c.listeners[0].port == 9092
    assert [str(d) for d in c.log_dirs] == ["rillet-data"]


def test_properties_file_and_overrides(tmp_path: Path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnode.id=3\nlog.retention.minutes = 5\nnum.partitions:4\n")
    c = BrokerConfig.load(f, {"num.partitions": "6"})
    assert c.node_id == 3 and c.retention_ms == 300000 and c["num.partitions"] == 6
    assert c.is_explicit("node.id") and not c.is_explicit("log.segment.bytes")


@pytest.mark.parametrize("key,value,fragment", [
    ("no.such.key", "1", "unknown config 'no.such.key'"),
    ("num.partitions", "zero", "num.partitions"),
    ("num.partitions", "0", "must be > 0"),
    ("auto.create.topics.enable", "maybe", "auto.create.topics.enable"),
    ("listeners", "nonsense", "invalid listener"),
    ("log.cleanup.policy", "shred", "delete, compact or both"),
    ("compression.type", "brotli", "zstd"),
    ("log.roll.ms", "0", "must be > 0"),
])
def test_bad_config_names_the_key(key, value, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.").replace("'", ".")):
        BrokerConfig.load(None, {key: value})


def test_topic_config_precedence():
    broker = BrokerConfig.load(None, {"log.retention.ms": "1000"})
    assert effective(broker, {}, "retention.ms") == (1000, 4)
    assert effective(broker, {"retention.ms": "50"}, "retention.ms") == (50, 1)
    assert effective(broker, {}, "segment.bytes") == (1073741824, 5)
    lc = log_config(broker, {"cleanup.policy": "compact,delete", "flush.messages": "1"})
    assert lc.retention_ms == 1000 and lc.flush_messages == 1
    assert lc.cleanup_policy == "compact,delete"


def test_topic_config_validation():
    with pytest.raises(ConfigError, match="unknown topic config"):
        validate_topic_configs({"retention.mss": "1"})
    with pytest.raises(ConfigError, match="cleanup.policy"):
        validate_topic_configs({"cleanup.policy": "shred"})


def test_bad_advertised_listener_is_a_config_error_at_load():
    with pytest.raises(ConfigError, match="advertised|listener"):
        BrokerConfig.load(None, {"advertised.listeners": "no-port-here"})


def test_compatibility_only_keys_are_reported():
    config = BrokerConfig.load(None, {"num.network.threads": "8", "num.partitions": "3"})
    assert config.ignored_keys() == ["num.network.threads"]


def test_topic_configs_are_checked_like_their_broker_synonyms():
    """One definition per setting: a value the broker refuses, the topic refuses too."""
    from rillet.topic_config import TOPIC_DEFS
    for name, tdef in TOPIC_DEFS.items():
        if tdef.synonym is None:
            continue
        broker_def = BROKER_DEFS[tdef.synonym]
        assert (tdef.definition.kind, tdef.definition.check) == (broker_def.kind, broker_def.check)
    for topic_key, broker_key, bad in (("compression.type", "compression.type", "brotli"),
                                       ("segment.ms", "log.roll.ms", "0"),
                                       ("min.insync.replicas", "min.insync.replicas", "0")):
        with pytest.raises(ConfigError, match=topic_key):
            validate_topic_configs({topic_key: bad})
        with pytest.raises(ConfigError, match=broker_key):
            BrokerConfig.load(None, {broker_key: bad})
