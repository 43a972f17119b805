"""The metadata delta: what one committed metadata step changed, computed once.

Kafka's MetadataDelta: each step the broker applies (one or more committed batches) is
turned into one MetadataDelta, handed with the new image to every publisher
(`on_metadata_update(delta, image)`), so no publisher compares whole images. It is
derived from the keys the records touched (metadata.image.ImageBuilder), so it costs
what the step changed, not the size of the cluster. The first image, and a snapshot
fetched from the leader, are deltas too: `between(old, new)` compares two images (a full
pass, paid only there), and `from_empty(image)` is the delta from the empty image.

`local` is what changed for this node (Kafka's LocalReplicaChanges): the partitions it
now leads or follows whose metadata changed, the ones it became leader or follower of,
and the replicas it no longer hosts (topic deleted, or a reassignment moved it away).

Immutable: any reader may keep it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..defs.acl import AclBinding
from .image import (TOPIC_RESOURCE, BrokerInfo, ImageBuilder, MetadataImage, PartitionInfo,
                    TopicInfo, build_batches)

TopicPartition = tuple[str, int]
ConfigResource = tuple[int, str]
QuotaEntity = tuple[tuple[str, "str | None"], ...]
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty_map() -> Any:
    """An empty mapping as a frozen dataclass's default (a shared, read-only one)."""
    return field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class PartitionChange:
    """One partition of a live topic whose metadata changed; `old` None: it is new."""
    topic: str
    old: PartitionInfo | None
    new: PartitionInfo

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.new.partition


@dataclass(frozen=True)
class LocalChanges:
    """What a step changed for one node's replicas."""
    leaders: Mapping[TopicPartition, PartitionInfo] = _empty_map()     # changed, led here
    followers: Mapping[TopicPartition, PartitionInfo] = _empty_map()   # changed, followed here
    became_leader: frozenset[TopicPartition] = frozenset()       # led elsewhere/not hosted before
    became_follower: frozenset[TopicPartition] = frozenset()     # led here/not hosted before
    # Hosted here before, no longer: the topic was deleted (or deleted and created again
    # under its name), or the replica set stopped naming this node (its log goes).
    deleted: frozenset[TopicPartition] = frozenset()
    moved_away: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class BrokerChange:
    """One broker's registration before and after (None: not registered)."""
    old: BrokerInfo | None
    new: BrokerInfo | None


@dataclass(frozen=True)
class MetadataDelta:
    """The change from image `old` to the image published with it.

    Complete on purpose: today's publishers read `local`, the deleted topics, `partitions`,
    `configs` and `brokers`; the ACL and SCRAM changes and the derived sets below are
    computed in the same pass for the publishers the issues plan (an authorizer cache,
    KIP-848's assignor), and are tested like the rest."""
    old: MetadataImage
    node_id: int
    # By name. A name both deleted and created was deleted and created again (a new id).
    created_topics: Mapping[str, TopicInfo] = _empty_map()   # the new TopicInfo
    deleted_topics: Mapping[str, TopicInfo] = _empty_map()   # the old TopicInfo
    changed_topics: Mapping[str, TopicInfo] = _empty_map()   # same id, a partition changed
    # Every partition of created and changed topics whose metadata changed.
    partitions: Mapping[TopicPartition, PartitionChange] = _empty_map()
    # Config resources whose entries changed: the entries now (empty: none left).
    configs: Mapping[ConfigResource, Mapping[str, str]] = _empty_map()
    acls_added: frozenset[AclBinding] = frozenset()
    acls_removed: frozenset[AclBinding] = frozenset()
    brokers: Mapping[int, BrokerChange] = _empty_map()
    scram: frozenset[tuple[str, str]] = frozenset()     # (user, mechanism) changed
    client_quotas: frozenset[QuotaEntity] = frozenset()   # entities whose quotas changed
    local: LocalChanges = field(default_factory=LocalChanges)

    @property
    def is_empty(self) -> bool:
        return not (self.created_topics or self.deleted_topics or self.partitions
                    or self.configs or self.acls_added or self.acls_removed or self.brokers
                    or self.scram or self.client_quotas)

    def topic_config_changed(self, name: str) -> bool:
        return (TOPIC_RESOURCE, name) in self.configs

    @property
    def registered(self) -> frozenset[int]:
        """Brokers registered (or registered again) in this step."""
        return frozenset(n for n, c in self.brokers.items() if c.new is not None and (
            c.old is None or c.old.epoch != c.new.epoch
            or c.old.incarnation != c.new.incarnation))

    @property
    def fenced(self) -> frozenset[int]:
        return frozenset(n for n, c in self.brokers.items() if c.new is not None
                         and c.new.fenced and (c.old is None or not c.old.fenced))

    @property
    def unfenced(self) -> frozenset[int]:
        return frozenset(n for n, c in self.brokers.items() if c.new is not None
                         and not c.new.fenced and (c.old is None or c.old.fenced))

    @property
    def unregistered(self) -> frozenset[int]:
        return frozenset(n for n, c in self.brokers.items() if c.new is None)


# -- building ------------------------------------------------------------------------------

def apply_batches(image: MetadataImage,
                  batches: Iterable[tuple[int, Iterable[dict[str, Any]]]],
                  node_id: int) -> tuple[MetadataDelta, MetadataImage]:
    """Replay committed (last offset, records) batches: the step's delta and new image."""
    builder, new = build_batches(image, batches)
    return _from_builder(builder, new, node_id), new


def _from_builder(b: ImageBuilder, new: MetadataImage, node_id: int) -> MetadataDelta:
    old = b.image
    deleted = {name: old.topics[name] for name in b.removed.values()}
    created = {name: new.topics[name] for name in b.added.values()}
    changed: dict[str, TopicInfo] = {}
    parts: dict[TopicPartition, PartitionChange] = {}
    for name, touched in b.touched_parts.items():
        topic = new.topics[name]
        before = None if name in created else old.topics.get(name)
        if before is None:
            # Created in this step: every partition is new (touched or not: none were).
            for p, part in topic.partitions.items():
                parts[(name, p)] = PartitionChange(name, None, part)
            continue
        for p in touched:
            was, now = before.partitions.get(p), topic.partitions[p]
            if was is not now:
                parts[(name, p)] = PartitionChange(name, was, now)
                changed[name] = topic
    configs = {key: new.configs.get(key, _EMPTY) for key in b.changed_configs
               if dict(old.configs.get(key, _EMPTY)) != dict(new.configs.get(key, _EMPTY))}
    brokers = {n: BrokerChange(old.brokers.get(n), new.brokers.get(n))
               for n in b.touched_brokers if old.brokers.get(n) != new.brokers.get(n)}
    scram = frozenset(k for k in b.touched_scram if old.scram.get(k) != new.scram.get(k))
    added = frozenset(a for a in b.touched_acls if a in new.acls and a not in old.acls)
    removed = frozenset(a for a in b.touched_acls if a in old.acls and a not in new.acls)
    quotas = _changed_quotas(old, new, b.touched_quotas)
    return _delta(old, node_id, created, deleted, changed, parts, configs, added, removed,
                  brokers, scram, quotas)


def _changed_quotas(old: MetadataImage, new: MetadataImage,
                    entities: Iterable[QuotaEntity]) -> frozenset[QuotaEntity]:
    return frozenset(e for e in entities if dict(old.client_quotas.get(e, _EMPTY))
                     != dict(new.client_quotas.get(e, _EMPTY)))


def between(old: MetadataImage, new: MetadataImage, node_id: int) -> MetadataDelta:
    """The delta of two whole images (a snapshot replacing the image): a full pass.

    Objects the two images share are skipped by identity; the rest are compared by value.
    """
    created: dict[str, TopicInfo] = {}
    deleted: dict[str, TopicInfo] = {}
    changed: dict[str, TopicInfo] = {}
    parts: dict[TopicPartition, PartitionChange] = {}
    for name, before in old.topics.items():
        now = new.topics.get(name)
        if now is None or now.topic_id != before.topic_id:
            deleted[name] = before
    for name, topic in new.topics.items():
        before = old.topics.get(name)
        if before is topic:
            continue
        if before is None or before.topic_id != topic.topic_id:
            created[name] = topic
            parts.update(((name, p), PartitionChange(name, None, part))
                         for p, part in topic.partitions.items())
            continue
        touched = [PartitionChange(name, before.partitions.get(p), part)
                   for p, part in topic.partitions.items() if before.partitions.get(p) != part]
        if touched:
            changed[name] = topic
            parts.update((c.tp, c) for c in touched)
    configs = {key: new.configs.get(key, _EMPTY) for key in {*old.configs, *new.configs}
               if dict(old.configs.get(key, _EMPTY)) != dict(new.configs.get(key, _EMPTY))}
    brokers = {n: BrokerChange(old.brokers.get(n), new.brokers.get(n))
               for n in {*old.brokers, *new.brokers}
               if old.brokers.get(n) != new.brokers.get(n)}
    scram = frozenset(k for k in {*old.scram, *new.scram} if old.scram.get(k) != new.scram.get(k))
    return _delta(old, node_id, created, deleted, changed, parts, configs,
                  frozenset(new.acls - old.acls), frozenset(old.acls - new.acls), brokers,
                  scram, _changed_quotas(old, new, {*old.client_quotas, *new.client_quotas}))


def from_empty(image: MetadataImage, node_id: int) -> MetadataDelta:
    """The first image (or a snapshot loaded at start) as a change from nothing."""
    return between(MetadataImage(cluster_id=image.cluster_id), image, node_id)


def _delta(old: MetadataImage, node_id: int, created: dict[str, TopicInfo],
           deleted: dict[str, TopicInfo], changed: dict[str, TopicInfo],
           parts: dict[TopicPartition, PartitionChange],
           configs: dict[ConfigResource, Mapping[str, str]], acls_added: frozenset[AclBinding],
           acls_removed: frozenset[AclBinding], brokers: dict[int, BrokerChange],
           scram: frozenset[tuple[str, str]],
           client_quotas: frozenset[QuotaEntity]) -> MetadataDelta:
    return MetadataDelta(
        old=old, node_id=node_id, created_topics=MappingProxyType(created),
        deleted_topics=MappingProxyType(deleted), changed_topics=MappingProxyType(changed),
        partitions=MappingProxyType(parts), configs=MappingProxyType(configs),
        acls_added=acls_added, acls_removed=acls_removed, brokers=MappingProxyType(brokers),
        scram=scram, client_quotas=client_quotas,
        local=local_changes(node_id, parts.values(), deleted.values()))


def local_changes(node_id: int, changes: Iterable[PartitionChange],
                  deleted: Iterable[TopicInfo]) -> LocalChanges:
    """What `changes` (and the deleted topics) mean for the replicas of `node_id`."""
    leaders: dict[TopicPartition, PartitionInfo] = {}
    followers: dict[TopicPartition, PartitionInfo] = {}
    became_leader: set[TopicPartition] = set()
    became_follower: set[TopicPartition] = set()
    moved_away: set[TopicPartition] = set()
    for c in changes:
        was_here = c.old is not None and node_id in c.old.replicas
        if node_id not in c.new.replicas:
            if was_here:
                moved_away.add(c.tp)
        elif c.new.leader == node_id:
            leaders[c.tp] = c.new
            if not was_here or c.old is None or c.old.leader != node_id:
                became_leader.add(c.tp)
        else:
            followers[c.tp] = c.new
            if not was_here or c.old is None or c.old.leader == node_id:
                became_follower.add(c.tp)
    gone = frozenset((t.name, p) for t in deleted for p, part in t.partitions.items()
                     if node_id in part.replicas)
    return LocalChanges(MappingProxyType(leaders), MappingProxyType(followers),
                        frozenset(became_leader), frozenset(became_follower), gone,
                        frozenset(moved_away))
