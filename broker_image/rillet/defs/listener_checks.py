"""The listener checks a broker config must pass at load: every listener mapped to a
security protocol once, its TLS files and SASL mechanisms usable, no SASL between brokers.

Apart from listeners.py because they need tls.py and sasl.py, which read their settings
through listeners.ListenerSettings."""
from __future__ import annotations

from typing import Any, Protocol

from .config_error import ConfigError
from .listeners import (SASL_PROTOCOLS, TLS_PROTOCOLS, BrokerSettings, Listener,
                        ListenerSettings, security_protocol_map)
from .sasl import SaslConfigError, check_mechanisms
from .tls import TlsConfigError, TlsSettings


class CheckedConfig(BrokerSettings, Protocol):
    """What the checks read beyond a listener's settings (broker_config.BrokerConfig is one)."""

    @property
    def listeners(self) -> list[Listener]: ...

    @property
    def quorum_voters(self) -> dict[int, Any]: ...

    @property
    def inter_broker_listener(self) -> Listener | None: ...

    @property
    def controller_listener(self) -> Listener | None: ...


def check_listeners(config: CheckedConfig) -> None:
    """Refuse what cannot be served as asked: an unmapped listener (as Kafka does), two
    listeners of one name, an SSL listener without its key and certificate, a SASL listener
    without a mechanism rillet has, and SASL between brokers (their client side is not
    implemented: brokers talk over a PLAINTEXT or SSL listener, as Strimzi's replication
    listener does)."""
    mapping = security_protocol_map(config)
    seen: set[str] = set()
    for spec, listener in zip(config["listeners"], config.listeners):
        name = listener.name.upper()
        if name in seen:
            raise ConfigError(f"listeners names {listener.name} twice")
        seen.add(name)
        protocol = mapping.get(name)
        if protocol is None:
            raise ConfigError(f"listener {spec} has no security protocol: "
                              f"listener.security.protocol.map does not name {listener.name}")
        settings = ListenerSettings(config, name)
        if protocol in TLS_PROTOCOLS:
            try:
                TlsSettings.from_config(settings).check()
            except TlsConfigError as exc:
                raise ConfigError(f"listener {spec} ({protocol}): {exc}") from None
        if protocol in SASL_PROTOCOLS:
            try:
                check_mechanisms(settings)
            except SaslConfigError as exc:
                raise ConfigError(f"listener {spec} ({protocol}): {exc}") from None
    for (name, key) in config.listener_values:
        if name not in seen:
            raise ConfigError(f"listener.name.{name.lower()}.{key} is set, but listeners has "
                              f"no listener {name}")
    # A lone node (its own quorum) has no other broker to talk to over its listener.
    alone = len(config.quorum_voters) <= 1 and "controller" in config["process.roles"]
    for role, listener in (("inter-broker", config.inter_broker_listener),
                           ("controller", config.controller_listener)):
        if alone and role == "inter-broker":
            continue
        if listener is not None and mapping[listener.name.upper()] in SASL_PROTOCOLS:
            raise ConfigError(f"the {role} listener {listener.name} uses "
                              f"{mapping[listener.name.upper()]}: rillet's brokers do not "
                              f"authenticate to each other with SASL; use a PLAINTEXT or SSL "
                              f"(mutual TLS) listener between brokers")
