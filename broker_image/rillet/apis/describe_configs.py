"""DescribeConfigs (key 32), v1-4, for topics (2) and brokers (4).

Every topic config is reported with its effective value and where it came
from (topic override, static broker config, default), with synonyms and
documentation on request. Broker configs show their dynamic layers (per broker,
cluster default; see dynamic_config.py) above the static file; the keys that can
change live are the ones not read-only. The cluster-default resource ("") lists
only the dynamic defaults, as Kafka's does.
v1: config source, synonyms. v3: config type, documentation. v4: flexible.
"""
from __future__ import annotations

from itertools import dropwhile
from typing import Any

from ..defs.broker_config import BrokerConfig
from ..defs.broker_defs import BROKER_DEFS, ConfigDef
from ..defs.deprecated_configs import TOPIC_NO_EFFECT
from ..defs.dynamic_keys import DYNAMIC_KEYS
from ..defs.topic_defs import TOPIC_DEFS
from ..dynamic_config import DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, DynamicBrokerConfig, static_of
from ..metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from ..protocol import errors
from ..topic_config import (DEFAULT, DYNAMIC_TOPIC, STATIC_BROKER, broker_source, effective,
                            render)
from .registry import CLUSTER, RequestContext, api

# ConfigEntry.ConfigType as the protocol numbers them.
_TYPE_CODES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}

# Broker settings Kafka reads under several keys (units), the key it prefers first.
_SYNONYM_GROUPS = (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   ("log.roll.ms", "log.roll.hours"),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))
_GROUP_OF = {key: group for group in _SYNONYM_GROUPS for key in group}


def _entry(d: ConfigDef, value: Any, source: int, read_only: bool,
           synonyms: list[dict[str, Any]]) -> dict[str, Any]:
    hidden = value is None or d.sensitive
    return {"name": d.name, "value": None if hidden else render(value),
            "read_only": read_only, "config_source": source, "is_sensitive": d.sensitive,
            "synonyms": synonyms, "config_type": _TYPE_CODES.get(d.kind, 0),
            "documentation": d.doc or None}


def _synonym(name: str, value: Any, source: int) -> dict[str, Any]:
    d = BROKER_DEFS.get(name)
    return {"name": name, "value": None if d is not None and d.sensitive else render(value),
            "source": source}


def broker_synonyms(broker: BrokerConfig, name: str | None) -> list[dict[str, Any]]:
    """The synonyms Kafka reports for broker key `name`, in its order.

    Kafka lists every key of the setting's group set dynamically for this broker, then
    those set as cluster defaults, then those server.properties sets, then every one with
    a default, and drops what comes before `name` itself: so retention.ms at its defaults
    shows none (log.retention.ms has no default), while a static log.retention.ms shows
    log.retention.hours=168 after it.
    """
    if name is None:
        return []
    group = _GROUP_OF.get(name, (name,))
    found = []
    if isinstance(broker, DynamicBrokerConfig):
        for layer, source in ((broker.per_broker, DYNAMIC_BROKER),
                              (broker.cluster_default, DYNAMIC_DEFAULT_BROKER)):
            found += [_synonym(key, layer[key], source) for key in group if key in layer]
    static = static_of(broker)
    found += [_synonym(key, static[key], STATIC_BROKER) for key in group
              if static.is_explicit(key) and static[key] is not None]
    found += [_synonym(key, BROKER_DEFS[key].default, DEFAULT) for key in group
              if BROKER_DEFS[key].default is not None]
    return list(dropwhile(lambda s: s["name"] != name, found))


def topic_config_entries(broker: BrokerConfig, overrides: dict[str, str],
                         keys: list[str] | None, with_synonyms: bool = False
                         ) -> list[dict[str, Any]]:
    out = []
    for name, tdef in sorted(TOPIC_DEFS.items()):
        if keys is not None and name not in keys:
            continue
        value, source = effective(broker, overrides, name)
        synonyms = []
        if with_synonyms:
            if name in overrides:
                synonyms.append({"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC})
            synonyms += broker_synonyms(broker, tdef.synonym)
        out.append(_entry(tdef.definition, value, source, False, synonyms))
    # Kafka 3.x names stored without effect are described as set, as 3.x described them:
    # a tool (or the operator) that set one reads it back and sees nothing left to change.
    for name in sorted(set(overrides) & TOPIC_NO_EFFECT.keys()):
        if keys is None or name in keys:
            value = overrides[name]
            synonyms = ([{"name": name, "value": value, "source": DYNAMIC_TOPIC}]
                        if with_synonyms else [])
            out.append(_entry(TOPIC_NO_EFFECT[name].definition, value,
                              DYNAMIC_TOPIC, False, synonyms))
    return out


def _broker_entries(broker: BrokerConfig, cluster_id: str, keys: list[str] | None,
                    with_synonyms: bool) -> list[dict[str, Any]]:
    out = []
    for name, d in sorted(BROKER_DEFS.items()):
        if keys is not None and name not in keys:
            continue
        # The id in meta.properties, which a config left unset does not show.
        value = cluster_id if name == "cluster.id" else broker[name]
        synonyms = broker_synonyms(broker, name) if with_synonyms else []
        out.append(_entry(d, value, broker_source(broker, name), name not in DYNAMIC_KEYS,
                          synonyms))
    return out


def _default_entries(broker: BrokerConfig, keys: list[str] | None,
                     with_synonyms: bool) -> list[dict[str, Any]]:
    """The cluster-default resource: its dynamic configs only."""
    layer = broker.cluster_default if isinstance(broker, DynamicBrokerConfig) else {}
    out = []
    for name, raw in sorted(layer.items()):
        if keys is not None and name not in keys:
            continue
        synonyms = [_synonym(name, raw, DYNAMIC_DEFAULT_BROKER)] if with_synonyms else []
        out.append(_entry(BROKER_DEFS[name], raw, DYNAMIC_DEFAULT_BROKER, False, synonyms))
    return out


def _describe(ctx: RequestContext, res: Any, with_synonyms: bool) -> dict[str, Any]:
    keys = list(res.configuration_keys) if res.configuration_keys else None
    broker = ctx.broker
    entry: dict[str, Any] = {"error_code": 0, "error_message": None,
                             "resource_type": res.resource_type,
                             "resource_name": res.resource_name, "configs": []}
    try:
        ctx.require("DESCRIBE_CONFIGS", *config_resource(res))
        if res.resource_type == TOPIC_RESOURCE:
            if res.resource_name not in broker.image.topics:
                raise errors.UnknownTopicOrPartition(
                    f"topic {res.resource_name!r} does not exist")
            overrides = dict(broker.image.topic_config(res.resource_name))
            entry["configs"] = topic_config_entries(broker.config, overrides, keys,
                                                    with_synonyms)
        elif res.resource_type == BROKER_RESOURCE:
            if res.resource_name == "":
                entry["configs"] = _default_entries(broker.config, keys, with_synonyms)
            elif res.resource_name != str(broker.node_id):
                raise errors.InvalidRequest(
                    f"broker {res.resource_name!r} is not this node ({broker.node_id})")
            else:
                entry["configs"] = _broker_entries(broker.config, broker.cluster_id, keys,
                                                   with_synonyms)
        else:
            raise errors.InvalidRequest(
                f"describing resource type {res.resource_type} is not supported")
    except Exception as exc:
        entry.update(error_code=errors.code_of(exc, "describe configs"),
                     error_message=errors.message_of(exc))
    return entry


def config_resource(res: Any) -> tuple[str, str]:
    """The ACL resource of a config resource: its topic, or the cluster for brokers."""
    if res.resource_type == TOPIC_RESOURCE:
        return "TOPIC", res.resource_name
    return "CLUSTER", CLUSTER


@api(key=32, versions=(1, 4))
async def describe_configs(ctx: RequestContext, req: Any) -> Any:
    with_synonyms = getattr(req, "include_synonyms", False)
    await ctx.await_topics(r.resource_name for r in req.resources
                           if r.resource_type == TOPIC_RESOURCE)
    return ctx.response({"throttle_time": 0,
                         "results": [_describe(ctx, r, with_synonyms) for r in req.resources]})
