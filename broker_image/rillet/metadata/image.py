"""The metadata image: an immutable view of brokers, topics, partitions, configs.

Never edited in place: `replay(image, records)` returns a new image. Readers
keep a reference to the image they started with, so a request sees one
consistent snapshot even if the controller commits meanwhile.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from . import records as r

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None
    epoch: int = 0
    fenced: bool = False


@dataclass(frozen=True)
class PartitionInfo:
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    offset: int = -1
    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: _EMPTY)
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0

    def topic_config(self, name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, name), _EMPTY)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)


class _Delta:
    """Mutable copies of the image's maps while one batch of records is replayed."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.brokers = dict(image.brokers)
        self.topics = {name: dict(t.partitions) for name, t in image.topics.items()}
        self.topic_ids = {name: t.topic_id for name, t in image.topics.items()}
        self.configs = {k: dict(v) for k, v in image.configs.items()}
        self.next_producer_id = image.next_producer_id

    def name_of(self, topic_id: str) -> str:
        tid = uuid.UUID(topic_id)
        for name, known in self.topic_ids.items():
            if known == tid:
                return name
        raise KeyError(f"metadata record for unknown topic id {topic_id}")

    def apply(self, rec: dict[str, Any]) -> None:
        kind = rec["type"]
        if kind == r.REGISTER_BROKER:
            self.brokers[rec["node_id"]] = BrokerInfo(
                rec["node_id"], rec["host"], rec["port"], rec.get("rack"),
                rec.get("epoch", 0), rec.get("fenced", False))
        elif kind == r.TOPIC:
            self.topic_ids[rec["name"]] = uuid.UUID(rec["topic_id"])
            self.topics[rec["name"]] = {}
        elif kind == r.PARTITION:
            name = self.name_of(rec["topic_id"])
            self.topics[name][rec["partition"]] = PartitionInfo(
                uuid.UUID(rec["topic_id"]), rec["partition"], tuple(rec["replicas"]),
                tuple(rec["isr"]), rec["leader"], rec["leader_epoch"],
                rec.get("partition_epoch", 0), tuple(rec.get("adding", ())),
                tuple(rec.get("removing", ())))
        elif kind == r.PARTITION_CHANGE:
            name = self.name_of(rec["topic_id"])
            old = self.topics[name][rec["partition"]]
            changes = {k: tuple(v) if isinstance(v, list) else v for k, v in rec.items()
                       if k in ("replicas", "isr", "leader", "leader_epoch", "adding",
                                "removing")}
            self.topics[name][rec["partition"]] = replace(
                old, partition_epoch=old.partition_epoch + 1, **changes)
        elif kind == r.REMOVE_TOPIC:
            name = self.name_of(rec["topic_id"])
            del self.topics[name]
            del self.topic_ids[name]
            self.configs.pop((TOPIC_RESOURCE, name), None)
        elif kind == r.CONFIG:
            key = (rec["resource_type"], rec["name"])
            entry = self.configs.setdefault(key, {})
            if rec["value"] is None:
                entry.pop(rec["key"], None)
            else:
                entry[rec["key"]] = rec["value"]
        elif kind == r.PRODUCER_IDS:
            self.next_producer_id = max(self.next_producer_id, rec["next_producer_id"])

    def freeze(self, offset: int) -> MetadataImage:
        topics = {
            name: TopicInfo(name, self.topic_ids[name], MappingProxyType(parts))
            for name, parts in self.topics.items()
        }
        return MetadataImage(
            cluster_id=self.image.cluster_id,
            offset=offset,
            brokers=MappingProxyType(self.brokers),
            topics=MappingProxyType(topics),
            topic_names=MappingProxyType({t.topic_id: n for n, t in topics.items()}),
            configs=MappingProxyType({k: MappingProxyType(v) for k, v in self.configs.items()}),
            next_producer_id=self.next_producer_id,
        )


def replay(image: MetadataImage, records: Iterable[dict[str, Any]], offset: int) -> MetadataImage:
    delta = _Delta(image)
    for rec in records:
        delta.apply(rec)
    return delta.freeze(offset)
