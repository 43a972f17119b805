"""Broker configuration: a server.properties file and `--set` overrides, loaded and checked.

`BrokerConfig.load(path, overrides)` reads a server.properties file and
`--set key=value` overrides. An unknown key or a bad value raises ConfigError
naming the key; the CLI turns that into exit code 2. A Kafka 3.x name rillet takes without
effect (deprecated_configs.BROKER_NO_EFFECT) is checked and kept apart, in `no_effect`, for
the CLI to log. The checks that only the keys together decide (listeners, TLS files, SASL
mechanisms, roles and voters) run at load, so the operator, which loads a Cluster's would-be
config with this class, refuses what a broker would.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .broker_defs import BROKER_DEFS, ConfigDef, parse_host_port, parse_value
from .config_error import ConfigError
from .deprecated_configs import BROKER_NO_EFFECT, check_no_effect
from .listener_checks import check_listeners
from .listeners import Listener, parse_listener, security_protocol_map, split_prefixed


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        sep = min((i for i in (text.find("="), text.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got {text!r}")
        out[text[:sep].strip()] = text[sep + 1:].strip()
    return out


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`--set key=value` arguments (repeatable) as a dict, later keys winning."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


@dataclass(frozen=True)
class Voter:
    """One controller.quorum.voters entry: id@host:port."""
    node_id: int
    host: str
    port: int


def parse_voters(specs: list[str]) -> dict[int, Voter]:
    """controller.quorum.voters: `id@host:port,...`; refuses duplicates and garbage."""
    voters: dict[int, Voter] = {}
    for spec in specs:
        try:
            ident, address = spec.split("@", 1)
            host, port = address.rsplit(":", 1)
            voter = Voter(int(ident), host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(f"invalid entry {spec!r} in controller.quorum.voters: "
                              "expected id@host:port") from None
        if voter.node_id < 0 or not 0 < voter.port < 65536 or not voter.host:
            raise ConfigError(f"invalid entry {spec!r} in controller.quorum.voters")
        if voter.node_id in voters:
            raise ConfigError(f"controller.quorum.voters names node {voter.node_id} twice")
        voters[voter.node_id] = voter
    return voters


class BrokerConfig:
    """Validated broker configuration; values are typed. Immutable after load."""

    def __init__(self, values: dict[str, Any], explicit_keys: set[str] | None = None,
                 listener_values: dict[tuple[str, str], Any] | None = None,
                 no_effect: dict[str, str] | None = None) -> None:
        self._values = values
        self._explicit_keys = explicit_keys or set()
        # (LISTENER, setting) -> value of `listener.name.<listener>.<setting>` keys.
        self.listener_values = listener_values or {}
        # Kafka 3.x names set here that rillet accepts without effect, as given.
        self.no_effect = no_effect or {}

    @classmethod
    def load(cls, path: Path | None = None, overrides: dict[str, str] | None = None
             ) -> "BrokerConfig":
        raw: dict[str, Any] = {}
        if path is not None:
            raw.update(read_properties(path))
        raw.update(overrides or {})
        values = {name: d.default for name, d in BROKER_DEFS.items()}
        per_listener: dict[tuple[str, str], Any] = {}
        no_effect: dict[str, str] = {}
        for key, value in raw.items():
            prefixed = split_prefixed(key)
            if prefixed is not None:
                d = BROKER_DEFS.get(prefixed[1]) or ConfigDef(key, "string", None,
                                                              sensitive=True)
                per_listener[prefixed] = parse_value(d, value)
                continue
            d = BROKER_DEFS.get(key)
            if d is not None:
                values[key] = parse_value(d, value)
            elif check_no_effect(BROKER_NO_EFFECT, "broker", key, value, announce=False):
                no_effect[key] = str(value)
            else:
                raise ConfigError(f"unknown config {key!r}")
        config = cls(values, {k for k in raw if k in BROKER_DEFS}, per_listener, no_effect)
        config._check_cross_field()
        return config

    def _check_cross_field(self) -> None:
        for spec in self.listeners:
            if spec.port < 0 or spec.port > 65535:
                raise ConfigError(f"invalid port in listeners: {spec.port}")
        if not self.listeners:
            raise ConfigError("config listeners must name at least one listener")
        self.advertised_listeners  # parsed now, so a bad one is a config error at load
        check_listeners(self)
        self._check_roles()
        self.advertised_broker_listeners  # every broker listener advertised, or an error now

    def _check_roles(self) -> None:
        roles = set(self["process.roles"])
        voters = self.quorum_voters
        names = set(self["controller.listener.names"])
        if not voters:
            if roles != {"broker", "controller"}:
                raise ConfigError("process.roles other than broker,controller needs "
                                  "controller.quorum.voters")
            return
        if not names:
            raise ConfigError("controller.quorum.voters is set but controller.listener.names "
                              "is empty: name the listener the quorum uses")
        if "controller" not in roles:
            if self.node_id in voters:
                raise ConfigError(f"controller.quorum.voters names node {self.node_id}, "
                                  "but process.roles has no controller")
            return
        me = voters.get(self.node_id)
        if me is None:
            raise ConfigError(f"controller.quorum.voters does not name this node "
                              f"(node.id {self.node_id}) although it is a controller")
        own = self.controller_listener
        if own is None:
            raise ConfigError(f"listeners has no listener named in controller.listener.names "
                              f"({','.join(sorted(names))})")
        if own.port != me.port:
            raise ConfigError(f"controller.quorum.voters gives node {self.node_id} the address "
                              f"{me.host}:{me.port}, but its {own.name} listener is "
                              f"{own.host}:{own.port}")

    def ignored_keys(self) -> list[str]:
        """Keys set explicitly that rillet accepts, but whose value has no effect yet."""
        return sorted(k for k in self._explicit_keys if not BROKER_DEFS[k].has_effect(self[k]))

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit_keys

    def source_of(self, key: str) -> int:
        """Kafka's ConfigSource of `key`: STATIC_BROKER_CONFIG (4) or DEFAULT_CONFIG (5);
        dynamic_config.DynamicBrokerConfig adds the dynamic layers."""
        return 4 if key in self._explicit_keys else 5

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(s) for s in self["listeners"]]

    @property
    def advertised_listeners(self) -> list[Listener]:
        specs = self["advertised.listeners"] or self["listeners"]
        return [parse_listener(s) for s in specs]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self["log.dirs"] or [self["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self["log.retention.minutes"] * 60000
        return self["log.retention.hours"] * 3600000

    @property
    def roll_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3600000

    @property
    def flush_ms(self) -> int:
        if self["log.flush.interval.ms"] is not None:
            return self["log.flush.interval.ms"]
        return self["log.flush.scheduler.interval.ms"]

    @property
    def broker_listeners(self) -> list[Listener]:
        """The listeners clients use: every one not named in controller.listener.names."""
        controller = {n.upper() for n in self["controller.listener.names"]}
        return [lst for lst in self.listeners if lst.name.upper() not in controller]

    def security_protocol(self, listener: Listener) -> str:
        """The security protocol of one of this node's listeners (PLAINTEXT, SSL)."""
        return security_protocol_map(self).get(listener.name.upper(), "PLAINTEXT")

    @property
    def controller_listener(self) -> Listener | None:
        names = {n.upper() for n in self["controller.listener.names"]}
        return next((lst for lst in self.listeners if lst.name.upper() in names), None)

    @property
    def quorum_voters(self) -> dict[int, Voter]:
        """The Raft voters; a node without quorum config is its own one-voter quorum."""
        return parse_voters(self["controller.quorum.voters"])

    @property
    def admin_http_address(self) -> tuple[str, int] | None:
        """(host, port) of the HTTP admin endpoint, or None when it is off."""
        spec = self["admin.http.listener"]
        return parse_host_port(spec) if spec else None

    @property
    def inter_broker_listener(self) -> Listener:
        """The broker listener brokers replicate over: inter.broker.listener.name, or the
        first broker listener."""
        brokers = self.broker_listeners
        if not brokers:
            raise ConfigError("listeners has no broker listener: every one is named in "
                              "controller.listener.names")
        name = self["inter.broker.listener.name"]
        if not name:
            return brokers[0]
        for listener in brokers:
            if listener.name.upper() == name.upper():
                return listener
        raise ConfigError(f"inter.broker.listener.name is {name}, but listeners has no broker "
                          f"listener of that name")

    def advertised(self, listener: Listener) -> Listener:
        """What clients are told to connect to for one of the broker listeners: the
        advertised listener of its name (without advertised.listeners, itself)."""
        if not self["advertised.listeners"]:
            return listener
        for advertised in self.advertised_listeners:
            if advertised.name.upper() == listener.name.upper():
                return advertised
        raise ConfigError(f"advertised.listeners has no {listener.name} listener, one served")

    @property
    def advertised_listener(self) -> Listener:
        """The inter-broker listener as advertised: the address registered first."""
        return self.advertised(self.inter_broker_listener)

    @property
    def advertised_broker_listeners(self) -> list[Listener]:
        """Every broker listener as advertised, the inter-broker one first."""
        first = self.inter_broker_listener
        rest = [lst for lst in self.broker_listeners if lst != first]
        return [self.advertised(lst) for lst in [first, *rest]]
