"""Dynamic broker configs: keys that change without a restart, layered over the static file.

They are CONFIG records of resource type BROKER (4) in the metadata log: resource name
= a node id (that broker only) or "" (the cluster-wide default), so they survive
restarts and reach every node like any other metadata. Precedence, as Kafka's:
per-broker dynamic > cluster default > static (server.properties / --set) > default.

Only keys whose new value is actually used at once are dynamic here (defs/dynamic_keys.py);
any other key is refused (INVALID_REQUEST naming it), so nothing is stored that would
silently do nothing until a restart.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from .defs.broker_config import BrokerConfig
from .defs.broker_defs import BROKER_DEFS, parse_value
from .defs.config_error import ConfigError
from .defs.deprecated_configs import BROKER_NO_EFFECT, check_no_effect
from .defs.dynamic_keys import DYNAMIC_KEYS
from .metadata.image import BROKER_RESOURCE, MetadataImage
from .protocol import errors

log = logging.getLogger(__name__)

# Kafka's ConfigSource ids for the dynamic layers.
DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER = 2, 3
CLUSTER_DEFAULT = ""


def check_resource_name(name: str) -> None:
    """A broker resource is a node id or "" (the cluster default)."""
    if name != CLUSTER_DEFAULT and not (name.isascii() and name.isdigit()):
        raise errors.InvalidRequest(
            f"broker resource name must be a node id or empty (the cluster default), "
            f"got {name!r}")


def validate_dynamic(changes: Mapping[str, str | None]) -> None:
    """Refuse keys that cannot change live (INVALID_REQUEST) and bad values (INVALID_CONFIG)."""
    for key in sorted(changes):
        if key in BROKER_NO_EFFECT:
            continue   # checked and logged below
        if key not in DYNAMIC_KEYS:
            what = "unknown broker config" if key not in BROKER_DEFS else \
                "broker config that cannot be changed without a restart"
            raise errors.InvalidRequest(
                f"{key!r} is an {what}; dynamic broker configs are: "
                f"{', '.join(sorted(DYNAMIC_KEYS))}")
    for key, value in sorted(changes.items()):
        if value is None:
            continue
        try:
            if check_no_effect(BROKER_NO_EFFECT, "dynamic broker", key, value):
                continue
            parse_value(BROKER_DEFS[key], value)
        except ConfigError as exc:
            raise errors.InvalidConfig(f"invalid value for {key}: {exc}") from None


def dynamic_layers(image: MetadataImage, node_id: int
                   ) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """(this broker's dynamic configs, the cluster defaults) as stored."""
    return (image.configs.get((BROKER_RESOURCE, str(node_id)), {}),
            image.configs.get((BROKER_RESOURCE, CLUSTER_DEFAULT), {}))


class DynamicBrokerConfig(BrokerConfig):
    """A static BrokerConfig with the dynamic layers applied; immutable, rebuilt on change."""

    def __init__(self, static: BrokerConfig, per_broker: Mapping[str, str],
                 cluster_default: Mapping[str, str]) -> None:
        values: dict[str, Any] = {key: static[key] for key in BROKER_DEFS}
        self.static = static
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        for layer, kept in ((cluster_default, self.cluster_default),
                            (per_broker, self.per_broker)):
            for key, raw in layer.items():
                if key not in DYNAMIC_KEYS:
                    continue   # written by a version that allowed it: not applied here
                try:
                    values[key] = parse_value(BROKER_DEFS[key], raw)
                except ConfigError as exc:
                    log.warning("ignoring dynamic broker config: %s", exc)
                    continue
                kept[key] = raw
        super().__init__(values, {k for k in BROKER_DEFS if static.is_explicit(k)})

    def source_of(self, key: str) -> int:
        if key in self.per_broker:
            return DYNAMIC_BROKER
        if key in self.cluster_default:
            return DYNAMIC_DEFAULT_BROKER
        return self.static.source_of(key)


def effective_config(static: BrokerConfig, image: MetadataImage, node_id: int) -> BrokerConfig:
    """The config this node runs with under `image` (the static one when nothing is dynamic)."""
    per_broker, cluster_default = dynamic_layers(image, node_id)
    if not per_broker and not cluster_default:
        return static
    return DynamicBrokerConfig(static, per_broker, cluster_default)


def static_of(config: BrokerConfig) -> BrokerConfig:
    return config.static if isinstance(config, DynamicBrokerConfig) else config
