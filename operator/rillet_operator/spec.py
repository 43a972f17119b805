"""Cluster and Topic specs as frozen dataclasses, parsed from the custom resources' dicts.

The CRD's OpenAPI schema already rejects wrong types, ranges and enums at the API server;
parsing here is what the builders rely on (defaults filled in, one shape), and raises
SpecError for what a schema cannot say. Pure: no API calls, no clock.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rillet.config import config_text

DEFAULT_IMAGE = "rillet/broker:dev"


class SpecError(ValueError):
    """A resource the operator cannot act on; `reason` becomes the condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Storage:
    type: str = "ephemeral"          # ephemeral | persistent-claim
    size: str | None = None          # e.g. 1Gi (persistent-claim)
    storage_class: str | None = None  # None: the cluster's default StorageClass
    delete_claim: bool = False       # a removed broker's claim goes with it on scale-down


@dataclass(frozen=True)
class Rebalance:
    throttle_bytes_per_second: int = 50 * 1024 * 1024   # 0 = unthrottled
    batch_size: int = 10


@dataclass(frozen=True)
class PodTemplate:
    affinity: dict | None = None
    tolerations: tuple[dict, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    priority_class_name: str | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """One rillet Cluster, as the builders see it."""
    name: str
    namespace: str
    replicas: int
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    config: tuple[tuple[str, str], ...] = ()   # broker configs by Kafka name, as strings
    storage: Storage = field(default_factory=Storage)
    resources: dict | None = None
    rack_topology_key: str | None = None
    pod: PodTemplate = field(default_factory=PodTemplate)
    pdb_max_unavailable: int = 1
    rebalance: Rebalance = field(default_factory=Rebalance)

    @property
    def config_dict(self) -> dict[str, str]:
        return dict(self.config)


@dataclass(frozen=True)
class TopicSpec:
    name: str            # metadata.name
    namespace: str
    cluster: str
    topic_name: str      # the Kafka topic name (spec.topicName or metadata.name)
    partitions: int
    replicas: int
    config: tuple[tuple[str, str], ...] = ()

    @property
    def config_dict(self) -> dict[str, str]:
        return dict(self.config)


def _config(raw: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    for key, value in (raw or {}).items():
        if value is None or isinstance(value, dict) or (
                isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list))
                                                         for v in value)):
            raise SpecError("InvalidConfig", f"spec.config.{key} must be a string, number, "
                                             f"boolean or list of them, got {value!r}")
    return tuple(sorted((str(k), config_text(v)) for k, v in (raw or {}).items()))


def _positive_int(spec: Mapping[str, Any], key: str, default: int | None = None,
                  where: str = "spec") -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError("InvalidSpec", f"{where}.{key} must be a whole number >= 1, "
                                       f"got {value!r}")
    return value


def parse_storage(raw: Mapping[str, Any] | None) -> Storage:
    raw = raw or {}
    kind = raw.get("type", "ephemeral")
    if kind == "ephemeral":
        return Storage()
    if kind == "persistent-claim":
        size = raw.get("size")
        if not size:
            raise SpecError("InvalidSpec", "spec.storage.size is required for persistent-claim")
        return Storage(kind, str(size), raw.get("class"), bool(raw.get("deleteClaim", False)))
    raise SpecError("InvalidSpec", f"spec.storage.type must be ephemeral or persistent-claim, "
                                   f"got {kind!r}")


def parse_cluster(name: str, namespace: str, spec: Mapping[str, Any]) -> ClusterSpec:
    pod = ((spec.get("template") or {}).get("pod")) or {}
    pdb = spec.get("pdb") or {}
    max_unavailable = pdb.get("maxUnavailable", 1)
    if isinstance(max_unavailable, bool) or not isinstance(max_unavailable, int) \
            or max_unavailable < 0:
        raise SpecError("InvalidSpec", f"spec.pdb.maxUnavailable must be a whole number >= 0, "
                                       f"got {max_unavailable!r}")
    return ClusterSpec(
        name=name, namespace=namespace,
        replicas=_positive_int(spec, "replicas"),
        image=spec.get("image") or DEFAULT_IMAGE,
        image_pull_policy=spec.get("imagePullPolicy") or "IfNotPresent",
        config=_config(spec.get("config")),
        storage=parse_storage(spec.get("storage")),
        resources=spec.get("resources") or None,
        rack_topology_key=((spec.get("rack") or {}).get("topologyKey")) or None,
        pod=PodTemplate(
            affinity=pod.get("affinity") or None,
            tolerations=tuple(pod.get("tolerations") or ()),
            labels=tuple(sorted((pod.get("labels") or {}).items())),
            annotations=tuple(sorted((pod.get("annotations") or {}).items())),
            priority_class_name=pod.get("priorityClassName") or None),
        pdb_max_unavailable=max_unavailable,
        rebalance=parse_rebalance(spec.get("rebalance")))


def parse_rebalance(raw: Mapping[str, Any] | None) -> Rebalance:
    raw = raw or {}
    throttle = raw.get("throttleBytesPerSecond", Rebalance.throttle_bytes_per_second)
    if isinstance(throttle, bool) or not isinstance(throttle, int) or throttle < 0:
        raise SpecError("InvalidSpec", f"spec.rebalance.throttleBytesPerSecond must be a whole "
                                       f"number >= 0, got {throttle!r}")
    return Rebalance(throttle, _positive_int(raw, "batchSize", Rebalance.batch_size,
                                             where="spec.rebalance"))


def parse_topic(name: str, namespace: str, spec: Mapping[str, Any]) -> TopicSpec:
    cluster = spec.get("cluster")
    if not cluster:
        raise SpecError("InvalidSpec", "spec.cluster is required")
    return TopicSpec(name=name, namespace=namespace, cluster=str(cluster),
                     topic_name=spec.get("topicName") or name,
                     partitions=_positive_int(spec, "partitions", 1),
                     replicas=_positive_int(spec, "replicas", 1),
                     config=_config(spec.get("config")))
