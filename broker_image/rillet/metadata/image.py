"""The metadata image: an immutable view of brokers, topics, partitions, configs.

Never edited in place: `replay(image, records)` returns a new image. Readers
keep a reference to the image they started with, so a request sees one
consistent snapshot even if the controller commits meanwhile.
"""
from __future__ import annotations

import uuid
from base64 import b64decode
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..defs.acl import AclBinding
from ..security.acl import AclIndex
from ..security.scram_credential import ScramCredential
from . import directories as dirs
from . import records as r
from .persistent_map import PersistentMap

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True)
class BrokerInfo:
    """One registered broker as the image knows it: address, rack, epoch, fencing."""
    node_id: int
    host: str
    port: int
    rack: str | None
    epoch: int = 0
    fenced: bool = False
    incarnation: str | None = None
    registered_offset: int = 0   # metadata offset a broker must have applied to be unfenced
    # (LISTENER NAME, host, port) of every broker listener; host/port above is the first,
    # the inter-broker one. Empty in records older than named listeners.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # The directory ids of its online log dirs when it registered (KIP-858; empty in
    # records older than that).
    log_dirs: tuple[uuid.UUID, ...] = ()

    def address(self, listener_name: str) -> tuple[str, int] | None:
        """Where a client of listener ``listener_name`` reaches this broker (Kafka answers
        each client with the brokers' endpoints of the listener it came in on)."""
        if not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener_name:
                return host, port
        return None


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: its replicas, ISR, leader and epochs, and a reassignment under way."""
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # The log dir id of each replica, in `replicas` order (metadata/directories.py);
    # empty: none recorded yet.
    directories: tuple[uuid.UUID, ...] = ()

    def directory_of(self, broker: int) -> uuid.UUID:
        return dirs.directory_of(self.replicas, self.directories, broker)

    def on_lost_dir(self, broker: int) -> bool:
        """`broker`'s replica is on a failed log dir: it may neither lead nor be in sync."""
        return self.directory_of(broker) == dirs.LOST


@dataclass(frozen=True)
class TopicInfo:
    """One topic: its name, id and partitions."""
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True)
class MetadataImage:
    """The committed cluster metadata at `offset`, replaced whole on every step (never edited)."""
    cluster_id: str
    offset: int = -1
    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: _EMPTY)
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    scram: Mapping[tuple[str, str], ScramCredential] = field(default_factory=lambda: _EMPTY)
    # Indexed by resource for the authorizer; the same object while a batch leaves the
    # ACLs alone, so the index is built once per ACL change, never per request.
    acls: AclIndex = AclIndex()
    # Client quotas: entity (quotas.entity: ((type, name or None), ...)) -> {key: value}.
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=lambda: _EMPTY)

    def topic_config(self, name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, name), _EMPTY)

    @cached_property
    def live_brokers(self) -> tuple[BrokerInfo, ...]:
        """Registered, unfenced brokers by node id: what clients and placement may use."""
        return tuple(sorted((b for b in self.brokers.values() if not b.fenced),
                            key=lambda b: b.node_id))

    @cached_property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(b.node_id for b in self.live_brokers)

    def brokers_for(self, listener_name: str) -> list[tuple[BrokerInfo, str, int]]:
        """Live brokers with their address on ``listener_name``; brokers without that
        listener are left out, as Kafka does. A listener no broker has (a request on the
        controller listener) gets the inter-broker addresses."""
        out = [(b, *addr) for b in self.live_brokers
               if (addr := b.address(listener_name)) is not None]
        if not out and self.live_brokers:
            out = [(b, b.host, b.port) for b in self.live_brokers]
        return out

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)


def _copy(mapping: Mapping[Any, Any]) -> dict[Any, Any]:
    """A dict of `mapping`'s items. A read-only view's copy() copies the dict beneath it
    as it is: dict(view) would re-insert (and re-hash: a UUID's hash runs Python code)
    every key, which made one change of a 10,000-topic image cost milliseconds."""
    copy = getattr(mapping, "copy", None)
    if copy is not None:
        out = copy()
        if type(out) is dict:
            return out
    return dict(mapping)


class ImageBuilder:
    """The changes one step of records makes to an image, copied on write.

    Topics and config entries the step does not touch keep their objects in the new
    image, so a change costs what it touches, not the size of the cluster, and readers
    can tell an untouched topic by identity (``old.topics[n] is new.topics[n]``). It also
    notes which keys the records touched, so metadata/delta.py can say what changed
    without comparing whole images.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.batch_end = image.offset + 1   # offset after the batch being applied
        self.brokers: dict[int, BrokerInfo] | None = None
        self.added: dict[uuid.UUID, str] = {}  # topics this batch creates
        self.removed: dict[uuid.UUID, str] = {}  # topics of the image this batch removes
        self.changed_parts: dict[str, dict[int, PartitionInfo]] = {}
        # An empty entry drops the resource's configs (a removed topic takes them along).
        self.changed_configs: dict[tuple[int, str], dict[str, str]] = {}
        self.next_producer_id = image.next_producer_id
        self.scram: dict[tuple[str, str], ScramCredential] | None = None
        self.acls: set[AclBinding] | None = None
        self.client_quotas: dict[tuple[tuple[str, str | None], ...],
                                 Mapping[str, float]] | None = None
        # What the records touched (a touched key may end up unchanged):
        self.touched_parts: dict[str, set[int]] = {}   # topic name -> partitions
        self.touched_brokers: set[int] = set()
        self.touched_scram: set[tuple[str, str]] = set()
        self.touched_acls: set[AclBinding] = set()
        self.touched_quotas: set[tuple[tuple[str, str | None], ...]] = set()

    def name_of(self, topic_id: str) -> str:
        tid = uuid.UUID(topic_id)
        name = self.added.get(tid)
        if name is None and tid not in self.removed:
            name = self.image.topic_names.get(tid)
        if name is None:
            raise KeyError(f"metadata record for unknown topic id {topic_id}")
        return name

    def _parts(self, name: str) -> dict[int, PartitionInfo]:
        parts = self.changed_parts.get(name)
        if parts is None:
            parts = self.changed_parts[name] = _copy(self.image.topics[name].partitions)
        return parts

    def _config(self, key: tuple[int, str]) -> dict[str, str]:
        entry = self.changed_configs.get(key)
        if entry is None:
            entry = self.changed_configs[key] = dict(self.image.configs.get(key, {}))
        return entry

    def apply(self, rec: dict[str, Any]) -> None:
        kind = rec["type"]
        if kind == r.REGISTER_BROKER:
            if self.brokers is None:
                self.brokers = _copy(self.image.brokers)
            self.touched_brokers.add(rec["node_id"])
            self.brokers[rec["node_id"]] = BrokerInfo(
                rec["node_id"], rec["host"], rec["port"], rec.get("rack"),
                rec.get("epoch", 0), rec.get("fenced", False), rec.get("incarnation"),
                # A snapshot carries it; a live registration is stamped with its own offset.
                rec.get("registered_offset", self.batch_end),
                tuple((e[0], e[1], e[2]) for e in rec.get("endpoints", ())),
                tuple(uuid.UUID(d) for d in rec.get("log_dirs", ())))
        elif kind == r.TOPIC:
            self.added[uuid.UUID(rec["topic_id"])] = rec["name"]
            self.changed_parts[rec["name"]] = {}
            self.touched_parts[rec["name"]] = set()
        elif kind == r.PARTITION:
            name = self.name_of(rec["topic_id"])
            self.touched_parts.setdefault(name, set()).add(rec["partition"])
            self._parts(name)[rec["partition"]] = PartitionInfo(
                uuid.UUID(rec["topic_id"]), rec["partition"], tuple(rec["replicas"]),
                tuple(rec["isr"]), rec["leader"], rec["leader_epoch"],
                rec.get("partition_epoch", 0), tuple(rec.get("adding", ())),
                tuple(rec.get("removing", ())), dirs.from_record(rec.get("directories", ())))
        elif kind == r.PARTITION_CHANGE:
            name = self.name_of(rec["topic_id"])
            parts = self._parts(name)
            self.touched_parts.setdefault(name, set()).add(rec["partition"])
            old = parts[rec["partition"]]
            changes = {k: tuple(v) if isinstance(v, list) else v for k, v in rec.items()
                       if k in ("replicas", "isr", "leader", "leader_epoch", "adding",
                                "removing")}
            if "directories" in rec:
                changes["directories"] = dirs.from_record(rec["directories"])
            elif "replicas" in rec and old.directories:
                changes["directories"] = dirs.realign(old.replicas, old.directories,
                                                      changes["replicas"])
            parts[rec["partition"]] = replace(
                old, partition_epoch=old.partition_epoch + 1, **changes)
        elif kind == r.REMOVE_TOPIC:
            name = self.name_of(rec["topic_id"])
            tid = uuid.UUID(rec["topic_id"])
            if self.added.pop(tid, None) is None:
                self.removed[tid] = name
            self.changed_parts.pop(name, None)
            self.touched_parts.pop(name, None)
            self.changed_configs[(TOPIC_RESOURCE, name)] = {}
        elif kind == r.CONFIG:
            entry = self._config((rec["resource_type"], rec["name"]))
            if rec["value"] is None:
                entry.pop(rec["key"], None)
            else:
                entry[rec["key"]] = rec["value"]
        elif kind in (r.FENCE_BROKER, r.UNFENCE_BROKER):
            if self.brokers is None:
                self.brokers = _copy(self.image.brokers)
            self.touched_brokers.add(rec["node_id"])
            known = self.brokers.get(rec["node_id"])
            if known is not None:
                self.brokers[rec["node_id"]] = replace(known, fenced=kind == r.FENCE_BROKER)
        elif kind == r.UNREGISTER_BROKER:
            if self.brokers is None:
                self.brokers = _copy(self.image.brokers)
            self.touched_brokers.add(rec["node_id"])
            self.brokers.pop(rec["node_id"], None)
        elif kind in (r.SCRAM_CREDENTIAL, r.REMOVE_SCRAM_CREDENTIAL):
            if self.scram is None:
                self.scram = _copy(self.image.scram)
            key = (rec["user"], rec["mechanism"])
            self.touched_scram.add(key)
            if kind == r.REMOVE_SCRAM_CREDENTIAL:
                self.scram.pop(key, None)
            else:
                self.scram[key] = ScramCredential(
                    b64decode(rec["salt"]), b64decode(rec["stored_key"]),
                    b64decode(rec["server_key"]), rec["iterations"])
        elif kind in (r.ACL, r.REMOVE_ACL):
            if self.acls is None:
                self.acls = set(self.image.acls)
            binding = AclBinding(*(rec[f] for f in r.ACL_FIELDS))
            self.touched_acls.add(binding)
            if kind == r.ACL:
                self.acls.add(binding)
            else:
                self.acls.discard(binding)
        elif kind == r.CLIENT_QUOTA:
            self._client_quota(rec)
        elif kind == r.PRODUCER_IDS:
            self.next_producer_id = max(self.next_producer_id, rec["next_producer_id"])

    def _client_quota(self, rec: dict[str, Any]) -> None:
        if self.client_quotas is None:
            self.client_quotas = _copy(self.image.client_quotas)
        entity = tuple((c[0], c[1]) for c in rec["entity"])
        self.touched_quotas.add(entity)
        values = dict(self.client_quotas.get(entity, {}))
        if rec["value"] is None:
            values.pop(rec["key"], None)
        else:
            values[rec["key"]] = float(rec["value"])
        if values:
            self.client_quotas[entity] = MappingProxyType(values)
        else:
            self.client_quotas.pop(entity, None)

    def freeze(self, offset: int) -> MetadataImage:
        image = self.image
        topics, names, configs = image.topics, image.topic_names, image.configs
        # The image's big maps are PersistentMaps: the new one shares every chunk this
        # step does not touch, so a change costs what it touches, at any cluster size.
        if self.removed or self.changed_parts:
            ids = {name: tid for tid, name in self.added.items()}
            topics = PersistentMap.of(topics).evolve(
                {name: TopicInfo(name, ids[name] if name in ids else topics[name].topic_id,
                                 MappingProxyType(parts))
                 for name, parts in self.changed_parts.items()},
                self.removed.values())
        if self.removed or self.added:
            names = PersistentMap.of(names).evolve(self.added, self.removed)
        if self.changed_configs:
            configs = PersistentMap.of(configs).evolve(
                {key: MappingProxyType(entry)
                 for key, entry in self.changed_configs.items() if entry},
                [key for key, entry in self.changed_configs.items() if not entry])
        return MetadataImage(
            cluster_id=image.cluster_id,
            offset=offset,
            brokers=image.brokers if self.brokers is None else MappingProxyType(self.brokers),
            topics=topics,
            topic_names=names,
            configs=configs,
            next_producer_id=self.next_producer_id,
            scram=image.scram if self.scram is None else MappingProxyType(self.scram),
            acls=image.acls if self.acls is None else AclIndex(self.acls),
            client_quotas=image.client_quotas if self.client_quotas is None
            else MappingProxyType(self.client_quotas),
        )


def replay(image: MetadataImage, records: Iterable[dict[str, Any]], offset: int) -> MetadataImage:
    builder = ImageBuilder(image)
    builder.batch_end = offset + 1
    for rec in records:
        builder.apply(rec)
    return builder.freeze(offset)


def build_batches(image: MetadataImage,
                  batches: Iterable[tuple[int, Iterable[dict[str, Any]]]]
                  ) -> tuple[ImageBuilder, MetadataImage]:
    """The builder that applied every (last offset, records) batch, and the image after."""
    builder = ImageBuilder(image)
    offset = image.offset
    for offset, records in batches:
        builder.batch_end = offset + 1
        for rec in records:
            builder.apply(rec)
    return builder, builder.freeze(offset)
