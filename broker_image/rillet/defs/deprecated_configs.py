"""Kafka 3.x-era config names that 3.x clusters accepted and rillet takes without effect.

Tools, applications and server.properties files written for Kafka 3.x still carry some names
Kafka deprecated (and 4.0 removed): a topic created with message.format.version or
message.timestamp.difference.max.ms, a broker config of the Kerberos login family, set
statically or at run time. Refusing them fails a request (or a start-up) that worked against
3.x; applying them means nothing here (rillet writes message format v2 only, serves no GSSAPI
and does not bound record timestamps). So each value is checked as Kafka 3.x checked it,
accepted, kept as given, and logged as having no effect, with the reason: by the broker for a
topic or dynamic config, by `rillet serve` at start-up for a static one (BrokerConfig.load
keeps those apart from the configs with effect).

Each entry: name -> NoEffect (its ConfigDef, kind and Kafka 3.x's check; why it has no effect).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .broker_defs import ConfigDef, parse_value

log = logging.getLogger(__name__)

_FORMAT = "rillet writes and serves record batch (message format) v2 only"
_KERBEROS = "rillet serves no GSSAPI (Kerberos) login"
_TIMESTAMP = "rillet does not bound how far a record's timestamp may be from the broker's clock"

# The releases Kafka 3.x's MetadataVersion knew, as its validator named them ("0.10.2", "2.8").
_RELEASES = frozenset(["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
                       "1.0", "1.1", *(f"2.{n}" for n in range(9)),
                       *(f"3.{n}" for n in range(10))])
_INTERNAL_VERSION = re.compile(r"-IV[0-9]+")


def kafka_version(v: str) -> bool:
    """A value Kafka 3.x's (log.)message.format.version validator took: a release it knew,
    longer forms cut to it as Kafka cut them ("2.8.1" is 2.8, "0.10.0.1" is 0.10.0), with an
    optional internal version ("2.8-IV1")."""
    release, sep, internal = v.partition("-")
    if sep and not _INTERNAL_VERSION.fullmatch(sep + internal):
        return False
    parts = release.split(".")
    return ".".join(parts[:3 if release.startswith("0.") else 2]) in _RELEASES \
        and all(p.isdigit() for p in parts)


@dataclass(frozen=True)
class NoEffect:
    """A config rillet accepts but does not act on, and why."""
    definition: ConfigDef
    why: str


def _no_effect(name: str, kind: str, why: str, check: Callable[[Any], bool] | None = None,
               check_doc: str = "") -> tuple[str, NoEffect]:
    return name, NoEffect(ConfigDef(name, kind, None, "", check, check_doc, effect=False), why)


_VERSION_DOC = "a Kafka release such as 2.8 or 3.0-IV1"


def _nonneg(v: int) -> bool:
    return v >= 0


TOPIC_NO_EFFECT: Mapping[str, NoEffect] = dict([
    # Deprecated in 3.0 (KIP-724), removed in 4.0.
    _no_effect("message.format.version", "string", _FORMAT, kafka_version, _VERSION_DOC),
    _no_effect("message.downconversion.enable", "bool", _FORMAT + "; it never down-converts"),
    # Deprecated in 3.6 (KIP-937, for message.timestamp.before/after.max.ms), removed in 4.0.
    _no_effect("message.timestamp.difference.max.ms", "long", _TIMESTAMP, _nonneg, ">= 0"),
])

# Broker configs, static (server.properties) or dynamic (Kafka 3.x reconfigured these live).
BROKER_NO_EFFECT: Mapping[str, NoEffect] = dict([
    _no_effect("log.message.format.version", "string", _FORMAT, kafka_version, _VERSION_DOC),
    _no_effect("log.message.downconversion.enable", "bool",
               _FORMAT + "; it never down-converts"),
    _no_effect("log.message.timestamp.difference.max.ms", "long", _TIMESTAMP, _nonneg, ">= 0"),
    _no_effect("sasl.kerberos.min.time.before.relogin", "long", _KERBEROS),
    _no_effect("sasl.kerberos.kinit.cmd", "string", _KERBEROS),
    _no_effect("sasl.kerberos.ticket.renew.jitter", "double", _KERBEROS),
    _no_effect("sasl.kerberos.ticket.renew.window.factor", "double", _KERBEROS),
    _no_effect("sasl.kerberos.principal.to.local.rules", "list", _KERBEROS),
    _no_effect("sasl.kerberos.service.name", "string", _KERBEROS),
])


def check_no_effect(known: Mapping[str, NoEffect], what: str, key: str,
                    value: str | None, announce: bool = True) -> bool:
    """True when `key` is one of `known` (value checked; with `announce`, its acceptance
    logged); False when it is not such a name. Raises ConfigError for a malformed value, as
    Kafka 3.x did."""
    entry = known.get(key)
    if entry is None:
        return False
    if value is not None:
        parse_value(entry.definition, value)
    if value is not None and announce:
        log.warning("%s config %s=%s accepted (a Kafka 3.x name) but has no effect: %s",
                    what, key, value, entry.why)
    return True


__all__ = ["TOPIC_NO_EFFECT", "BROKER_NO_EFFECT", "NoEffect", "check_no_effect",
           "kafka_version"]
