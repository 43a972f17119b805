"""Admin APIs about dynamic configs: of a topic, of a broker, of the cluster-wide default.

Only the overrides are read back (DescribeConfigs entries whose source is the dynamic one
asked for); static and default values are left out. Changes are incremental
(IncrementalAlterConfigs: SET or DELETE per key).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..protocol.errors import BrokerNotAvailable
from .admin_base import (BROKER_RESOURCE, CLUSTER_DEFAULT, DELETE_CONFIG, DESCRIBE_CONFIGS,
                         DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
                         DYNAMIC_TOPIC_CONFIG, INCREMENTAL_ALTER_CONFIGS, SET_CONFIG,
                         TOPIC_RESOURCE, AdminBase)
from .connection import raise_for


def _broker_resource_name(broker: int | None) -> str:
    return CLUSTER_DEFAULT if broker is None else str(broker)


def _describe_body(resource_type: int, name: str) -> dict[str, Any]:
    return {"resources": [{"resource_type": resource_type, "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}


def _overrides(resp: Any, source: int, what: str) -> dict[str, str]:
    """The configs of a DescribeConfigs answer that come from `source`."""
    r = resp.results[0]
    raise_for(r.error_code, f"describe configs of {what}", r.error_message)
    return {c.name: c.value for c in r.configs
            if int(c.config_source) == source and c.value is not None}


class ConfigAdmin(AdminBase):
    async def _alter_configs(self, resource_type: int, name: str,
                             set_configs: Mapping[str, str], delete: Iterable[str],
                             what: str) -> None:
        configs = [{"name": k, "config_operation": SET_CONFIG, "value": v}
                   for k, v in set_configs.items()]
        configs += [{"name": k, "config_operation": DELETE_CONFIG, "value": None}
                    for k in delete]
        resp = await self._any(INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": resource_type, "resource_name": name,
                           "configs": configs}],
            "validate_only": False})
        for r in resp.responses:
            raise_for(r.error_code, f"alter configs of {what}", r.error_message)

    async def alter_broker_configs(self, broker: int | None, set_configs: Mapping[str, str],
                                   delete: Iterable[str] = ()) -> None:
        """IncrementalAlterConfigs on a BROKER resource: SET each of `set_configs`, DELETE
        each of `delete`, for node `broker` or, when None, the cluster-wide default.

        Any broker takes the request (it is relayed to the active controller, as KRaft
        Kafka forwards it), so a node id that is down can still be configured. The change
        is committed to the metadata log; each broker applies it when it replays that, so
        a describe right afterwards may still show the old value for a moment. A key that
        cannot change without a restart is refused with InvalidRequest.
        """
        name = _broker_resource_name(broker)
        await self._alter_configs(BROKER_RESOURCE, name, set_configs, delete,
                                  f"broker {name!r}")

    async def broker_config_overrides(self, broker: int | None) -> dict[str, str]:
        """The dynamic configs set on node `broker` itself (config source
        DYNAMIC_BROKER_CONFIG), or, when None, the cluster-wide defaults
        (DYNAMIC_DEFAULT_BROKER_CONFIG); static and default values are left out.

        A node describes only its own configs, so a node id is asked of that broker
        directly: BrokerNotAvailable when Metadata does not list it as live.
        """
        name = _broker_resource_name(broker)
        body = _describe_body(BROKER_RESOURCE, name)
        if broker is None:
            resp = await self._any(DESCRIBE_CONFIGS, 4, body)
            return _overrides(resp, DYNAMIC_DEFAULT_BROKER_CONFIG, f"broker {name!r}")
        cluster = await self._cluster([])
        if broker not in cluster.brokers:
            raise BrokerNotAvailable(f"broker {broker} is not live (Metadata lists "
                                     f"{sorted(cluster.brokers)})")
        resp = await self._conn(*cluster.brokers[broker]).request(DESCRIBE_CONFIGS, 4, body)
        return _overrides(resp, DYNAMIC_BROKER_CONFIG, f"broker {name!r}")

    async def topic_config_overrides(self, name: str) -> dict[str, str]:
        """The topic's own configs (DescribeConfigs source DYNAMIC_TOPIC_CONFIG), no defaults."""
        resp = await self._any(DESCRIBE_CONFIGS, 4, _describe_body(TOPIC_RESOURCE, name))
        return _overrides(resp, DYNAMIC_TOPIC_CONFIG, name)

    async def alter_topic_configs(self, name: str, set_configs: dict[str, str],
                                  delete: list[str] | tuple[str, ...] = ()) -> None:
        """IncrementalAlterConfigs: SET each of `set_configs`, DELETE each of `delete`."""
        await self._alter_configs(TOPIC_RESOURCE, name, set_configs, delete, name)
