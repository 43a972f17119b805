import re
from pathlib import Path

import pytest

from rillet.defs.broker_config import BrokerConfig
from rillet.defs.broker_defs import BROKER_DEFS
from rillet.defs.config_error import ConfigError
from rillet.defs.topic_defs import validate_topic_configs
from rillet.topic_config import effective, log_config


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


def test_every_bad_topic_key_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        validate_topic_configs({"no.such": "1", "retention.ms": "abc", "cleanup.policy": "delete"})
    assert str(err.value) == ("unknown topic config 'no.such'; retention.ms must be a whole "
                              "number of milliseconds, got 'abc'")


def test_bad_advertised_listener_is_a_config_error_at_load():
    with pytest.raises(ConfigError, match="advertised|listener"):
        BrokerConfig.load(None, {"advertised.listeners": "no-port-here"})


def test_compatibility_only_keys_are_reported():
    config = BrokerConfig.load(None, {"num.network.threads": "8", "num.partitions": "3"})
    assert config.ignored_keys() == ["num.network.threads"]


CLUSTER_NODE = {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9103"}


@pytest.mark.parametrize("settings,ignored", [
    (CLUSTER_NODE, []),
    ({**CLUSTER_NODE, "inter.broker.listener.name": "PLAINTEXT"}, []),
    ({"process.roles": "controller,broker"}, []),
    ({"compression.type": "gzip"}, ["compression.type"]),
    ({"compression.type": "producer"}, []),
    ({"replica.lag.time.max.ms": "10000", "log.segment.delete.delay.ms": "1",
      "num.replica.fetchers": "2"}, ["log.segment.delete.delay.ms", "num.replica.fetchers"]),
])
def test_keys_without_effect_yet_depend_on_their_value(settings, ignored):
    assert BrokerConfig.load(None, settings).ignored_keys() == ignored


def test_no_key_left_unflagged_is_unused():
    """Each key flagged as having an effect is read somewhere in the broker (or through a
    topic config, or the config definitions' own helpers): a key nothing reads must say so."""
    import rillet
    from rillet.defs.topic_defs import TOPIC_DEFS
    package = Path(rillet.__file__).parent
    definitions = package / "defs" / "broker_defs.py"
    sources = "\n".join(p.read_text() for p in package.rglob("*.py") if p != definitions)
    config_py = definitions.read_text()
    read_via_property = config_py[config_py.index("BROKER_DEFS: dict"):]
    synonyms = {t.synonym for t in TOPIC_DEFS.values() if t.synonym}
    unused = [name for name, d in BROKER_DEFS.items()
              if d.effect is True and f'"{name}"' not in sources and name not in synonyms
              and f'"{name}"' not in read_via_property]
    assert unused == []


@pytest.mark.parametrize("key,value,message", [
    ("log.retention.ms", "banana", "log.retention.ms must be a whole number of milliseconds, "
                                   "got 'banana'"),
    ("log.segment.bytes", "1.5", "log.segment.bytes must be a whole number of bytes, got '1.5'"),
    ("log.retention.hours", "1_000", "log.retention.hours must be a whole number of hours, "
                                     "got '1_000'"),
    ("num.partitions", "99999999999", "num.partitions must be a whole number from -2147483648 "
                                      "to 2147483647, got '99999999999'"),
    ("num.partitions", "0", "num.partitions must be > 0, got '0'"),
    ("delete.topic.enable", "yes", "delete.topic.enable must be true or false, got 'yes'"),
    ("log.cleaner.min.cleanable.ratio", "half", "log.cleaner.min.cleanable.ratio must be a "
                                                "number, got 'half'"),
    ("process.roles", "broker,zookeeper", "process.roles must be broker, controller or both, "
                                          "got 'broker,zookeeper'"),
])
def test_config_errors_speak_the_users_terms(key, value, message):
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(None, {key: value})
    assert str(err.value) == message
    assert "invalid literal" not in message and "base 10" not in message


def test_topic_config_errors_speak_the_users_terms():
    with pytest.raises(ConfigError) as err:
        validate_topic_configs({"retention.ms": "banana"})
    assert str(err.value) == "retention.ms must be a whole number of milliseconds, got 'banana'"


# --- listeners and their security protocols ----------------------------------------------------


@pytest.mark.parametrize("settings,fragment", [
    ({"listeners": "SSL://127.0.0.1:9093"}, "listener SSL://127.0.0.1:9093 (SSL): an SSL "
                                             "listener needs a key and certificate: "
                                             "ssl.keystore.location"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094",
      "sasl.enabled.mechanisms": "GSSAPI"},
     "listener SASL_PLAINTEXT://127.0.0.1:9094 (SASL_PLAINTEXT): SASL mechanism GSSAPI is "
     "not available in rillet"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9094", "sasl.enabled.mechanisms": "PLAIN"},
     "PLAIN needs listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listeners": "sasl_ssl://127.0.0.1:9094"}, "(SASL_SSL): an SSL listener needs a key"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092",
      "listener.name.tls.ssl.keystore.location": "/k.pem"},
     "listener.name.tls.ssl.keystore.location is set, but listeners has no listener TLS"),
    ({"listener.name.plaintext.log.dirs": "/x"}, "per-listener settings are"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "REPL"},
     "inter.broker.listener.name is REPL, but listeners has no broker listener"),
    ({**CLUSTER_NODE, "listeners": "SASL_PLAINTEXT://127.0.0.1:9092,"
                                   "CONTROLLER://127.0.0.1:9093"},
     "the inter-broker listener SASL_PLAINTEXT uses SASL_PLAINTEXT: rillet's brokers do not "
     "authenticate to each other with SASL"),
    ({"listeners": "CLIENT://127.0.0.1:9092",
      "listener.security.protocol.map": "CLIENT:SSL"},
     "listener CLIENT://127.0.0.1:9092 (SSL): an SSL listener needs a key and certificate"),
    ({"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": "/k.pem",
      "ssl.client.auth": "required"}, "ssl.client.auth=required needs a truststore"),
    ({"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.key": "KEY"},
     "ssl.keystore.key and ssl.keystore.certificate.chain go together"),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type must be PEM"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth must be none, requested or required"),
    ({"listeners": "CLIENT://127.0.0.1:9092"},
     "listener CLIENT://127.0.0.1:9092 has no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092",
      "listener.security.protocol.map": "CONTROLLER:PLAINTEXT"},
     "listener PLAINTEXT://127.0.0.1:9092 has no security protocol"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "NAME:PROTOCOL"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "NAME:PROTOCOL"),
])
def test_listeners_that_would_serve_a_weaker_protocol_are_refused(settings, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        BrokerConfig.load(None, settings)


def test_an_ssl_listener_with_a_keystore_loads():
    config = BrokerConfig.load(None, {"listeners": "SSL://127.0.0.1:9093",
                                      "ssl.keystore.location": "/etc/rillet/broker.pem"})
    assert config.security_protocol(config.inter_broker_listener) == "SSL"


def test_per_listener_settings_override_the_shared_ones_for_that_listener_only():
    from rillet.defs.listeners import ListenerSettings
    config = BrokerConfig.load(None, {
        "listeners": "PLAIN://127.0.0.1:9092,SECURE://127.0.0.1:9093,REPL://127.0.0.1:9094",
        "listener.security.protocol.map": "PLAIN:SASL_PLAINTEXT,SECURE:SASL_SSL,REPL:SSL",
        "ssl.keystore.location": "/shared.pem",
        "listener.name.repl.ssl.keystore.location": "/repl.pem",
        "listener.name.repl.ssl.client.auth": "required",
        "ssl.truststore.location": "/ca.pem",
        "listener.name.plain.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plain.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "inter.broker.listener.name": "REPL"})
    repl, secure, plain = (ListenerSettings(config, n) for n in ("REPL", "secure", "PLAIN"))
    assert repl["ssl.keystore.location"] == "/repl.pem"
    assert repl["ssl.client.auth"] == "required" and secure["ssl.client.auth"] == "none"
    assert secure["ssl.keystore.location"] == "/shared.pem"
    assert plain["sasl.enabled.mechanisms"] == ["PLAIN"]
    assert secure["sasl.enabled.mechanisms"] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert "user_alice" in plain.jaas("PLAIN") and secure.jaas("PLAIN") is None
    assert config.inter_broker_listener.name == "REPL"
    # The inter-broker listener registers first: other brokers replicate from that address.
    assert [lst.name for lst in config.advertised_broker_listeners] == ["REPL", "PLAIN",
                                                                        "SECURE"]


def test_controller_listener_mapped_to_plaintext_is_accepted_and_not_served():
    cluster_style = {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                     "controller.listener.names": "CONTROLLER"}
    config = BrokerConfig.load(None, cluster_style)
    assert config.inter_broker_listener.port == 9092 and config.advertised_listener.port == 9092
    # Without a map, Kafka (KRaft) maps the controller listeners to PLAINTEXT itself;
    # the controller listener first does not make it the one clients are sent to.
    config = BrokerConfig.load(None, {
        "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names": "CONTROLLER",
        "advertised.listeners": "PLAINTEXT://broker-0.example:9092"})
    assert config.inter_broker_listener.name == "PLAINTEXT"
    assert (config.advertised_listener.host, config.advertised_listener.port) == \
        ("broker-0.example", 9092)


def test_listeners_without_a_broker_listener_are_refused():
    with pytest.raises(ConfigError, match="no broker listener"):
        BrokerConfig.load(None, {"listeners": "CONTROLLER://127.0.0.1:9093",
                                 "controller.listener.names": "CONTROLLER"})
    with pytest.raises(ConfigError, match="advertised.listeners has no PLAINTEXT listener"):
        BrokerConfig.load(None, {"advertised.listeners": "OTHER://h:1",
                                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                                   "OTHER:PLAINTEXT"})


def test_topic_configs_are_checked_like_their_broker_synonyms():
    """One definition per setting: a value the broker refuses, the topic refuses too."""
    from rillet.defs.topic_defs import TOPIC_DEFS
    for name, tdef in TOPIC_DEFS.items():
        if tdef.synonym is None:
            continue   # a topic-only config (the replication throttle lists)
        broker_def = BROKER_DEFS[tdef.synonym]
        assert (tdef.definition.kind, tdef.definition.check) == (broker_def.kind, broker_def.check)
    for topic_key, broker_key, bad in (("compression.type", "compression.type", "brotli"),
                                       ("segment.ms", "log.roll.ms", "0"),
                                       ("min.insync.replicas", "min.insync.replicas", "0")):
        with pytest.raises(ConfigError, match=topic_key):
            validate_topic_configs({topic_key: bad})
        with pytest.raises(ConfigError, match=broker_key):
            BrokerConfig.load(None, {broker_key: bad})


def test_admin_http_listener():
    assert BrokerConfig.load()["admin.http.listener"] == ""
    assert BrokerConfig.load().admin_http_address is None          # off by default
    assert BrokerConfig.load(None, {"admin.http.listener": ""}).admin_http_address is None
    c = BrokerConfig.load(None, {"admin.http.listener": "0.0.0.0:9404"})
    assert c.admin_http_address == ("0.0.0.0", 9404)
    assert BrokerConfig.load(None, {"admin.http.listener": "[::1]:9404"}
                             ).admin_http_address == ("::1", 9404)


@pytest.mark.parametrize("value", ["9404", ":9404", "localhost", "host:port", "host:70000",
                                   "host:-1", "http://host:9404/", "http://host:9404"])
def test_bad_admin_http_listener_is_a_config_error(value):
    with pytest.raises(ConfigError, match=r"admin\.http\.listener must be HOST:PORT"):
        BrokerConfig.load(None, {"admin.http.listener": value})
