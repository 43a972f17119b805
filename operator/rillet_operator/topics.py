"""What to do to bring a Kafka topic to its Topic resource's spec: pure decisions.

`plan(spec, observed, brokers)` compares the spec with the topic as the cluster reports it and
returns the steps (create, add partitions, alter configs, move replicas to a new replication
factor) or the refusal that becomes a condition (PartitionDecreaseNotSupported,
InvalidReplicationFactor). A refusal changes nothing.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .spec import TopicSpec


@dataclass(frozen=True)
class ObservedTopic:
    """The topic as the cluster reports it (Metadata + DescribeConfigs)."""
    name: str
    topic_id: str
    partitions: dict[int, tuple[int, ...]]         # partition -> replica broker ids
    isr: dict[int, tuple[int, ...]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides only
    reassigning: bool = False   # a partition move of this topic is in progress

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        return min((len(r) for r in self.partitions.values()), default=0)


@dataclass(frozen=True)
class Plan:
    create: bool = False
    partitions_to: int | None = None            # CreatePartitions total count
    set_configs: dict[str, str] = field(default_factory=dict)
    delete_configs: tuple[str, ...] = ()
    refusal: tuple[str, str] | None = None       # (reason, message)
    # partition -> new replicas (AlterPartitionReassignments) for a replication factor change
    replicas_to: dict[int, tuple[int, ...]] = field(default_factory=dict)
    awaiting_moves: bool = False                 # a replication factor change is moving

    @property
    def empty(self) -> bool:
        return not (self.create or self.partitions_to or self.set_configs or self.delete_configs
                    or self.replicas_to)


def plan(spec: TopicSpec, observed: ObservedTopic | None,
         brokers: Mapping[int, str | None] | None = None) -> Plan:
    """brokers: the registered brokers (id -> rack), for a replication factor change."""
    brokers = brokers or {}
    if observed is None:
        return Plan(create=True)
    if spec.partitions < observed.partition_count:
        return Plan(refusal=("PartitionDecreaseNotSupported",
                             f"topic {spec.topic_name} has {observed.partition_count} partitions;"
                             f" Kafka cannot decrease that to {spec.partitions}"))
    replicas_to: dict[int, tuple[int, ...]] = {}
    awaiting = False
    if any(len(r) != spec.replicas for r in observed.partitions.values()):
        if observed.reassigning:
            awaiting = True   # the union replica sets of a move: wait for it to finish
        elif spec.replicas > len(brokers):
            return Plan(refusal=("InvalidReplicationFactor",
                                 f"topic {spec.topic_name}: replication factor {spec.replicas} "
                                 f"needs {spec.replicas} brokers; the cluster has "
                                 f"{len(brokers)}"))
        else:
            replicas_to = resize_replicas(observed.partitions, brokers, spec.replicas)
    want = spec.config_dict
    set_configs = {k: v for k, v in want.items() if observed.configs.get(k) != v}
    # The operator owns the topic's config: an override not in the spec is removed.
    delete = tuple(sorted(k for k in observed.configs if k not in want))
    return Plan(partitions_to=spec.partitions if spec.partitions > observed.partition_count
                else None, set_configs=set_configs, delete_configs=delete,
                replicas_to=replicas_to, awaiting_moves=awaiting)


def resize_replicas(partitions: Mapping[int, tuple[int, ...]], brokers: Mapping[int, str | None],
                    rf: int) -> dict[int, tuple[int, ...]]:
    """New replica lists giving every partition `rf` replicas, for the partitions that change.

    Growing keeps every current replica and adds brokers of racks the partition does not use
    yet, then the least loaded (replicas of this topic); shrinking keeps the first replica
    (the preferred leader) and drops replicas whose rack is held twice first, then the most
    loaded. Only the difference moves, so a change costs the minimum number of copies.
    """
    load = Counter(b for replicas in partitions.values() for b in replicas)
    out: dict[int, tuple[int, ...]] = {}
    for p in sorted(partitions):
        replicas = list(partitions[p])
        while len(replicas) > rf:
            racks = Counter(brokers.get(b) for b in replicas)
            drop = max(replicas[1:], key=lambda b: (racks[brokers.get(b)] > 1, load[b],
                                                    replicas.index(b)))
            replicas.remove(drop)
            load[drop] -= 1
        while len(replicas) < rf:
            used = {brokers.get(b) for b in replicas}
            add = min((b for b in brokers if b not in replicas),
                      key=lambda b: (brokers[b] in used, load[b], b))
            replicas.append(add)
            load[add] += 1
        if tuple(replicas) != tuple(partitions[p]):
            out[p] = tuple(replicas)
    return out


def under_replicated(observed: ObservedTopic) -> list[int]:
    return sorted(p for p, replicas in observed.partitions.items()
                  if len(observed.isr.get(p, ())) < len(replicas))
