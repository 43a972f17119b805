"""Kafka 3.x-era config names that 3.x clusters accepted and rillet takes without effect.

Tools and applications written for Kafka 3.x still send some names Kafka deprecated (and 4.0
removed): a topic created with message.format.version, a dynamic broker config of the
Kerberos login family. Refusing them fails a request that worked against 3.x; applying them
means nothing here (rillet writes message format v2 only and serves no GSSAPI). So each is
checked for a well-formed value, accepted, stored as given, and logged as having no effect,
with the reason. Static server.properties names of the same family are ConfigDefs with
effect=False in broker_defs.py, logged at start-up the same way.

Each entry: name -> (kind as broker_defs.parse_value reads it, why it has no effect).
"""
from __future__ import annotations

import logging
from typing import Mapping

from .broker_defs import ConfigDef, parse_value

log = logging.getLogger(__name__)

_FORMAT = "rillet writes and serves record batch (message format) v2 only"
_KERBEROS = "rillet serves no GSSAPI (Kerberos) login"

TOPIC_NO_EFFECT: Mapping[str, tuple[str, str]] = {
    # Deprecated in 3.0 (KIP-724), removed in 4.0.
    "message.format.version": ("string", _FORMAT),
    "message.downconversion.enable": ("bool", _FORMAT + "; it never down-converts"),
}

BROKER_DYNAMIC_NO_EFFECT: Mapping[str, tuple[str, str]] = {
    "log.message.format.version": ("string", _FORMAT),
    "log.message.downconversion.enable": ("bool", _FORMAT + "; it never down-converts"),
    # Kafka 3.x reconfigured these per listener at run time.
    "sasl.kerberos.min.time.before.relogin": ("long", _KERBEROS),
    "sasl.kerberos.kinit.cmd": ("string", _KERBEROS),
    "sasl.kerberos.ticket.renew.jitter": ("double", _KERBEROS),
    "sasl.kerberos.ticket.renew.window.factor": ("double", _KERBEROS),
    "sasl.kerberos.principal.to.local.rules": ("list", _KERBEROS),
    "sasl.kerberos.service.name": ("string", _KERBEROS),
}


def check_no_effect(known: Mapping[str, tuple[str, str]], what: str, key: str,
                    value: str | None, announce: bool = True) -> bool:
    """True when `key` is one of `known` (value checked; with `announce`, its acceptance
    logged); False when it is not such a name. Raises ConfigError for a malformed value, as
    Kafka 3.x did."""
    entry = known.get(key)
    if entry is None:
        return False
    kind, why = entry
    if value is not None:
        parse_value(ConfigDef(key, kind, None), value)
    if value is not None and announce:
        log.warning("%s config %s=%s accepted (a Kafka 3.x name) but has no effect: %s",
                    what, key, value, why)
    return True


__all__ = ["TOPIC_NO_EFFECT", "BROKER_DYNAMIC_NO_EFFECT", "check_no_effect"]
