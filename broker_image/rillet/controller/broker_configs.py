"""Decisions on dynamic broker configs (pure): image + requested changes -> CONFIG records.

The records are of resource type BROKER, named by node id or "" (the cluster default);
see dynamic_config.py for which keys may change and how the layers combine.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..dynamic_config import check_resource_name, validate_dynamic
from ..metadata import records as mrec
from ..metadata.image import BROKER_RESOURCE, MetadataImage

ChangesFor = Callable[[Mapping[str, str]], dict[str, str | None]]


def decide_broker_configs(image: MetadataImage, name: str, changes_for: ChangesFor,
                          replace_all: bool) -> list[dict[str, Any]]:
    """Records setting ``changes_for(current)`` (None deletes) on broker resource ``name``.

    replace_all (AlterConfigs): keys not named are deleted. Nothing is returned when any
    key is refused, so a request is applied whole or not at all.
    """
    check_resource_name(name)
    current = dict(image.configs.get((BROKER_RESOURCE, name), {}))
    # Removing a key that is not set changes nothing, whatever the key: Kafka's tools clear
    # every throttle key they know of (e.g. replica.alter.log.dirs.io.max.bytes.per.second
    # after a --verify), set or not.
    changes = {key: value for key, value in changes_for(current).items()
               if value is not None or key in current}
    validate_dynamic(changes)
    target = {} if replace_all else dict(current)
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return [{"type": mrec.CONFIG, "resource_type": BROKER_RESOURCE, "name": name,
             "key": key, "value": target.get(key)}
            for key in sorted(set(current) | set(target))
            if current.get(key) != target.get(key)]
