"""Broker config definitions: Kafka's names, kinds, defaults and checks, one value parsed
(`parse_value`) and rendered (`config_text`).

Shared by the broker (which loads its config with them) and the operator (which validates a
Cluster's spec.config with them and renders the ConfigMap), so both refuse the same values.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Callable

from .config_error import ConfigError

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConfigDef:
    """One broker config: its name, type, Kafka default, check and documentation."""
    name: str
    kind: str            # int, long, bool, string, list, double
    default: Any
    doc: str = ""
    check: Callable[[Any], bool] | None = None
    check_doc: str = ""
    # False, or a predicate on the value that is False: accepted (so an existing
    # server.properties loads) but without effect yet; logged at start.
    effect: bool | Callable[[Any], bool] = True
    # A secret: DescribeConfigs says it is set, never its value (Kafka's PASSWORD type).
    sensitive: bool = False

    def has_effect(self, value: Any) -> bool:
        return self.effect(value) if callable(self.effect) else self.effect


def _nonneg(v: Any) -> bool:
    return v >= 0


def _positive(v: Any) -> bool:
    return v > 0


def _minus_one_or_more(v: Any) -> bool:
    return v >= -1


def _cleanup_policy(v: list[str]) -> bool:
    return bool(v) and all(p in ("delete", "compact") for p in v)


def _roles(v: list[str]) -> bool:
    return bool(v) and set(v) <= {"broker", "controller"}


def parse_host_port(spec: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`); ValueError when it is not one."""
    host, sep, port = spec.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or any(c in host for c in "/@ ") or not port.isdigit() \
            or not 0 <= int(port) <= 65535:
        raise ValueError(spec)
    return host, int(port)


def _ip_or_empty(v: str) -> bool:
    if v == "":
        return True
    try:
        ipaddress.ip_address(v)
    except ValueError:
        return False
    return True


def _host_port_or_empty(v: str) -> bool:
    if v == "":
        return True
    try:
        parse_host_port(v)
    except ValueError:
        return False
    return True


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _known_selector(v: str) -> bool:
    return v == RACK_AWARE_SELECTOR


# Kafka's authorizer class names; either turns rillet's ACL authorizer on.
AUTHORIZERS = {"", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "kafka.security.authorizer.AclAuthorizer"}

_CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


_BROKER_DEFS = [
    ConfigDef("node.id", "int", 1, "this node's id", _nonneg, ">= 0"),
    ConfigDef("process.roles", "list", ["broker", "controller"], "KRaft roles of this node",
              _roles, "broker, controller or both"),
    ConfigDef("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "host:port to listen on"),
    ConfigDef("advertised.listeners", "list", None, "what clients are told to connect to"),
    ConfigDef("controller.quorum.voters", "list", [], "id@host:port of the controller voters"),
    ConfigDef("controller.listener.names", "list", [], "listener names of the controller"),
    ConfigDef("inter.broker.listener.name", "string", None,
              "the listener brokers replicate over (default: the first broker listener)"),
    ConfigDef("listener.security.protocol.map", "list",
              ["SASL_SSL:SASL_SSL", "PLAINTEXT:PLAINTEXT", "SSL:SSL",
               "SASL_PLAINTEXT:SASL_PLAINTEXT"],
              "listener name:security protocol"),
    ConfigDef("ssl.keystore.type", "string", "PEM", "keystore format", lambda v: v == "PEM",
              "PEM (rillet reads PEM keystores; convert JKS/PKCS12 with keytool/openssl)"),
    ConfigDef("ssl.keystore.location", "string", None, "PEM file: private key and certificate chain"),
    ConfigDef("ssl.keystore.certificate.chain", "string", None, "inline PEM certificate chain"),
    ConfigDef("ssl.keystore.key", "string", None, "inline PEM private key", sensitive=True),
    ConfigDef("ssl.keystore.password", "string", None,
              "unused with PEM keystores (ssl.key.password decrypts the key)", effect=False,
              sensitive=True),
    ConfigDef("ssl.key.password", "string", None, "password of an encrypted PEM key",
              sensitive=True),
    ConfigDef("ssl.truststore.type", "string", "PEM", "truststore format", lambda v: v == "PEM",
              "PEM (rillet reads PEM truststores)"),
    ConfigDef("ssl.truststore.location", "string", None, "PEM file of trusted CA certificates"),
    ConfigDef("ssl.truststore.certificates", "string", None, "inline PEM CA certificates"),
    ConfigDef("ssl.client.auth", "string", "none", "ask TLS clients for a certificate",
              lambda v: v in ("none", "requested", "required"), "none, requested or required"),
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https",
              "https: check the host name of brokers this one dials; empty: do not",
              lambda v: v in ("", "https"), "https or empty"),
    ConfigDef("sasl.enabled.mechanisms", "list", ["SCRAM-SHA-256", "SCRAM-SHA-512"],
              "SASL mechanisms of SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
              "brokers do not use SASL between themselves in rillet", effect=False),
    ConfigDef("sasl.server.max.receive.size", "int", 524288,
              "the largest request a SASL listener reads before its client has authenticated "
              "(an anonymous peer cannot make the broker decode a 100 MiB frame)",
              _positive, "> 0"),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100,
              "how long a failed authentication is held before the answer (slows guessing)",
              _nonneg, ">= 0"),
    ConfigDef("authorizer.class.name", "string", "",
              "StandardAuthorizer (Kafka's class name) turns ACL checks on; empty: off",
              lambda v: v in AUTHORIZERS, "empty or " + " or ".join(sorted(AUTHORIZERS - {""}))),
    ConfigDef("super.users", "string", "", "principals allowed everything (User:a;User:b)"),
    ConfigDef("allow.everyone.if.no.acl.found", "bool", False,
              "a resource without any ACL is open to everyone"),
    ConfigDef("broker.rack", "string", None, "rack (zone) of this broker"),
    ConfigDef("log.dirs", "list", None, "data directories"),
    ConfigDef("log.dir", "string", "./rillet-data", "data directory when log.dirs is unset"),
    ConfigDef("num.partitions", "int", 1, "partitions of auto-created topics", _positive, "> 0"),
    ConfigDef("default.replication.factor", "int", 1, "", _positive, "> 0"),
    ConfigDef("min.insync.replicas", "int", 1, "", _positive, "> 0"),
    ConfigDef("auto.create.topics.enable", "bool", True),
    ConfigDef("delete.topic.enable", "bool", True),
    ConfigDef("log.segment.bytes", "int", 1073741824, "", lambda v: v >= 14, ">= 14"),
    ConfigDef("log.roll.ms", "long", None, "", _positive, "> 0"),
    ConfigDef("log.roll.hours", "int", 168, "", _positive, "> 0"),
    ConfigDef("log.retention.ms", "long", None, "", _minus_one_or_more, ">= -1"),
    ConfigDef("log.retention.minutes", "int", None),
    ConfigDef("log.retention.hours", "int", 168),
    ConfigDef("log.retention.bytes", "long", -1, "", _minus_one_or_more, ">= -1"),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, "", _positive, "> 0"),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "", _positive, "> 0"),
    ConfigDef("log.flush.interval.ms", "long", None, "", _nonneg, ">= 0"),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX),
    ConfigDef("log.index.interval.bytes", "int", 4096, "", _nonneg, ">= 0"),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, "", lambda v: v >= 4, ">= 4"),
    ConfigDef("log.segment.delete.delay.ms", "long", 60000, "", _nonneg, ">= 0", effect=False),
    ConfigDef("log.cleanup.policy", "list", ["delete"], "", _cleanup_policy,
              "delete, compact or both"),
    ConfigDef("log.cleaner.enable", "bool", True),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "", _nonneg, ">= 0"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, "", _nonneg, ">= 0"),
    ConfigDef("log.cleaner.threads", "int", 1, "logs compacted at once", _positive, "> 0"),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", "",
              lambda v: v in ("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime"),
    ConfigDef("message.max.bytes", "int", 1048588, "", _nonneg, ">= 0"),
    ConfigDef("compression.type", "string", "producer", "", lambda v: v in _CODECS,
              ", ".join(_CODECS[:-1]) + " or " + _CODECS[-1],
              effect=lambda v: v == "producer"),  # batches are stored as produced
    ConfigDef("unclean.leader.election.enable", "bool", False),
    ConfigDef("auto.leader.rebalance.enable", "bool", True),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300, "", _positive, "> 0"),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", 10, "", _nonneg, ">= 0"),
    # KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector lets consumers
    # fetch from an in-sync replica in their rack; unset, they fetch from the leader.
    ConfigDef("replica.selector.class", "string", None, "", _known_selector,
              "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
    ConfigDef("socket.request.max.bytes", "int", 104857600, "", _positive, "> 0"),
    ConfigDef("connections.max.idle.ms", "long", 600000),
    ConfigDef("offsets.topic.num.partitions", "int", 50, "", _positive, "> 0"),
    ConfigDef("offsets.topic.replication.factor", "int", 3, "", _positive, "> 0"),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, "", _positive, "> 0"),
    ConfigDef("offsets.retention.minutes", "int", 10080, "", _positive, "> 0"),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, "", _positive, "> 0"),
    ConfigDef("offsets.commit.timeout.ms", "int", 5000, "", _positive, "> 0"),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "", _nonneg, ">= 0"),
    ConfigDef("group.min.session.timeout.ms", "int", 6000),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000),
    ConfigDef("group.max.size", "int", 2**31 - 1),
    # The transaction coordinator (rillet/txn/): its internal topic and its timers.
    ConfigDef("transaction.state.log.num.partitions", "int", 50, "", _positive, "> 0"),
    ConfigDef("transaction.state.log.replication.factor", "int", 3, "", _positive, "> 0"),
    ConfigDef("transaction.state.log.min.isr", "int", 2, "", _positive, "> 0"),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, "", _positive, "> 0"),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, "", _positive, "> 0"),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "",
              _positive, "> 0"),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, "", _positive, "> 0"),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "",
              _positive, "> 0"),
    # KIP-890 part 1: a leader asks the coordinator before a producer's first transactional
    # batch on a partition (txn/verification.py).
    ConfigDef("transaction.partition.verification.enable", "bool", True),
    ConfigDef("num.network.threads", "int", 3, effect=False),
    ConfigDef("num.io.threads", "int", 8, effect=False),
    ConfigDef("num.recovery.threads.per.data.dir", "int", 1, effect=False),
    ConfigDef("num.replica.fetchers", "int", 1, effect=False),
    ConfigDef("replica.lag.time.max.ms", "long", 30000, "", _positive, "> 0"),
    ConfigDef("replica.fetch.max.bytes", "int", 1048576, "", _positive, "> 0"),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500, "", _nonneg, ">= 0"),
    ConfigDef("replica.fetch.min.bytes", "int", 1, "", _positive, "> 0"),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "", _positive,
              "> 0"),
    # Replication throttles (KIP-73): bytes/s for the replicas topics name in
    # leader/follower.replication.throttled.replicas; dynamic (see dynamic_keys.py).
    ConfigDef("leader.replication.throttled.rate", "long", LONG_MAX,
              "bytes/s a leader serves to throttled follower replicas", _nonneg, ">= 0"),
    ConfigDef("follower.replication.throttled.rate", "long", LONG_MAX,
              "bytes/s a follower fetches for throttled replicas", _nonneg, ">= 0"),
    ConfigDef("replication.quota.window.num", "int", 11, "samples of the throttle's rate",
              _positive, "> 0"),
    ConfigDef("replication.quota.window.size.seconds", "int", 1,
              "seconds per sample of the throttle's rate", _positive, "> 0"),
    # Client quotas (KIP-13): samples of each group's rates (quotas/manager.py).
    ConfigDef("quota.window.num", "int", 11, "samples of a client quota's rate", _positive,
              "> 0"),
    ConfigDef("quota.window.size.seconds", "int", 1, "seconds per sample of a client "
              "quota's rate", _positive, "> 0"),
    ConfigDef("socket.send.buffer.bytes", "int", 102400, effect=False),
    ConfigDef("socket.receive.buffer.bytes", "int", 102400, effect=False),
    ConfigDef("metadata.log.dir", "string", None),
    ConfigDef("cluster.id", "string", None, "cluster id used when formatting new storage"),
    ConfigDef("controller.quorum.election.timeout.ms", "int", 1000, "", _positive, "> 0"),
    ConfigDef("controller.quorum.fetch.timeout.ms", "int", 2000, "", _positive, "> 0"),
    ConfigDef("controller.quorum.request.timeout.ms", "int", 2000, "", _positive, "> 0"),
    ConfigDef("broker.session.timeout.ms", "int", 9000, "", _positive, "> 0"),
    ConfigDef("broker.heartbeat.interval.ms", "int", 2000, "", _positive, "> 0"),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", 20971520, "",
              _positive, "> 0"),
    # rillet's own: the source address of the connections this node opens (Kafka lets the
    # OS choose). Hosts with several addresses, and the test harness's per-node loopback
    # addresses (tests/cluster.py), use it so peers can tell this node's links apart.
    ConfigDef("outbound.source.address", "string", "",
              "IP address every connection this node opens (to controllers, leaders, other "
              "brokers) binds to as its source (empty: the OS's choice)", _ip_or_empty,
              "an IP address of this host, or empty"),
    # rillet's own: the HTTP admin endpoint (/healthz, /readyz, /metrics; rillet/admin_http.py).
    ConfigDef("admin.http.listener", "string", "", "HOST:PORT of the HTTP admin endpoint "
              "(empty: off)", _host_port_or_empty, "HOST:PORT (e.g. 0.0.0.0:9404) or empty"),
]

BROKER_DEFS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Typed value of `raw` for `d`; raises ConfigError naming the key, in the user's terms."""
    if raw is None:
        return None
    try:
        value = _typed(d, raw)
    except ValueError as exc:
        raise ConfigError(f"{d.name} must be {exc}, got {raw!r}") from None
    if d.check is not None and value is not None and not d.check(value):
        raise ConfigError(f"{d.name} must be {d.check_doc}, got {raw!r}")
    return value


# The unit a number is counted in, from the key's last word (retention.ms, segment.bytes).
_UNITS = {"ms": "milliseconds", "bytes": "bytes", "minutes": "minutes", "hours": "hours",
          "messages": "messages"}
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_RANGES = {"int": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 1)}


def _typed(d: ConfigDef, raw: Any) -> Any:
    """`raw` as `d`'s kind; a ValueError says what was expected ("a whole number of ...")."""
    text = str(raw).strip()
    if d.kind in _RANGES:
        unit = _UNITS.get(d.name.rsplit(".", 1)[-1])
        expected = f"a whole number of {unit}" if unit else "a whole number"
        low, high = _RANGES[d.kind]
        if not _WHOLE_NUMBER.fullmatch(text):  # int() would take "1_000" and "٣"
            raise ValueError(expected)
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"{expected} from {low} to {high}")
        return value
    if d.kind == "double":
        try:
            return float(text)
        except ValueError:
            raise ValueError("a number") from None
    if d.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError("true or false")
        return text.lower() == "true"
    if d.kind == "list":
        return raw if isinstance(raw, list) else [p.strip() for p in text.split(",") if p.strip()]
    return text


def config_text(value: Any) -> str:
    """A value as a properties file or `--set` wants it: Java's spelling of booleans, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(config_text(v) for v in value)
    return str(value)
