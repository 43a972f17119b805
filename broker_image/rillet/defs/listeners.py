"""Listeners: names, addresses, security protocols and per-listener settings, as Kafka has them.

`listeners=PLAIN://:9092,TLS://:9093,SASL://:9094` with `listener.security.protocol.map`
naming each one's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). Every listener not
named in `controller.listener.names` serves clients; `inter.broker.listener.name` (default:
the first of them) is the one other brokers replicate over and the address the broker
registers first. A setting may be given for one listener only with Kafka's prefix,
`listener.name.<name lower case>.<setting>` (its TLS files, its SASL mechanisms, its JAAS
lines): `ListenerSettings` answers with the prefixed value where there is one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from .config_error import ConfigError


class BrokerSettings(Protocol):
    """What a listener reads of a broker's config (broker_config.BrokerConfig is one)."""

    listener_values: Mapping[tuple[str, str], Any]   # (LISTENER, key) -> prefixed value

    def __getitem__(self, key: str) -> Any: ...

    def get(self, key: str) -> Any: ...

    def is_explicit(self, key: str) -> bool: ...


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PREFIX = "listener.name."
# What may carry a listener prefix: TLS and SASL settings, and `<mechanism>.sasl.jaas.config`.
_PREFIXABLE = re.compile(r"(ssl\.|sasl\.)[a-z.]+|(plain|scram-sha-256|scram-sha-512)"
                         r"\.sasl\.jaas\.config")


@dataclass(frozen=True)
class Listener:
    """One entry of listeners (or advertised.listeners): name://host:port."""
    name: str
    host: str
    port: int


def parse_listener(spec: str) -> Listener:
    try:
        name, rest = spec.split("://", 1)
        host, port = rest.rsplit(":", 1)
        return Listener(name, host.strip("[]"), int(port))
    except ValueError:
        raise ConfigError(f"invalid listener {spec!r}: expected NAME://host:port") from None


def split_prefixed(key: str) -> tuple[str, str] | None:
    """(LISTENER, setting) of a `listener.name.<listener>.<setting>` key, else None; a
    prefixed key naming something that cannot be set per listener is a ConfigError."""
    if not key.startswith(PREFIX):
        return None
    name, sep, setting = key[len(PREFIX):].partition(".")
    if not sep or not name or not _PREFIXABLE.fullmatch(setting):
        raise ConfigError(f"unknown config {key!r}: per-listener settings are "
                          f"listener.name.<listener>.ssl.*, .sasl.* or "
                          f".<mechanism>.sasl.jaas.config")
    return name.upper(), setting


class ListenerSettings:
    """A broker config as one listener sees it: its `listener.name.<name>.` values first."""

    def __init__(self, config: BrokerSettings, listener_name: str) -> None:
        self.config = config
        self.name = listener_name.upper()

    def __getitem__(self, key: str) -> Any:
        own = self.config.listener_values.get((self.name, key))
        if own is not None:
            return own
        return self.config.get(key)

    def jaas(self, mechanism: str) -> str | None:
        return self[f"{mechanism.lower()}.sasl.jaas.config"]


def security_protocol_map(config: BrokerSettings) -> dict[str, str]:
    """Listener name (upper case, as Kafka normalises it) -> security protocol.

    Kafka's rules: an explicit listener.security.protocol.map is the whole map; the default
    one maps each protocol to itself and (KRaft) the controller listeners to PLAINTEXT.
    """
    mapping = {}
    for entry in config["listener.security.protocol.map"]:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map entries must be NAME:PROTOCOL "
                              f"with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}, "
                              f"got {entry!r}")
        mapping[name.strip().upper()] = protocol.strip().upper()
    if not config.is_explicit("listener.security.protocol.map"):
        for name in config["controller.listener.names"]:
            mapping.setdefault(name.upper(), "PLAINTEXT")
    return mapping
