"""What to do to bring a Kafka topic to its Topic resource's spec: pure decisions.

`plan(spec, observed)` compares the spec with the topic as the cluster reports it and returns
the steps (create, add partitions, alter configs, change the replication factor) or the refusal
that becomes a condition (PartitionDecreaseNotSupported). A refusal changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .spec import TopicSpec


# Topic configs the Cluster's rebalance sets and clears (KIP-73 throttled replicas).
REBALANCE_OWNED = frozenset({"leader.replication.throttled.replicas",
                             "follower.replication.throttled.replicas"})


@dataclass(frozen=True)
class ObservedTopic:
    """The topic as the cluster reports it (Metadata + DescribeConfigs)."""
    name: str
    topic_id: str
    partitions: dict[int, tuple[int, ...]]         # partition -> replica broker ids
    isr: dict[int, tuple[int, ...]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides only

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
    replicas_to: int | None = None               # replication factor change by reassignment
    refusal: tuple[str, str] | None = None       # (reason, message)

    @property
    def empty(self) -> bool:
        return not (self.create or self.partitions_to or self.set_configs or self.delete_configs
                    or self.replicas_to)


def replication_refusal(topic: str, factor: int, brokers: int) -> tuple[str, str] | None:
    """The refusal of a replication factor the cluster's brokers cannot hold: the same for a
    new topic and for a change of an existing one."""
    if factor <= brokers:
        return None
    return ("InvalidReplicationFactor", f"topic {topic}: replication factor {factor} needs "
                                        f"{factor} brokers; the cluster has {brokers}")


def plan(spec: TopicSpec, observed: ObservedTopic | None, brokers: int | None = None) -> Plan:
    """`brokers`: how many brokers the cluster has (None: not known, nothing refused for it)."""
    if observed is None:
        refusal = replication_refusal(spec.topic_name, spec.replicas, brokers) \
            if brokers is not None else None
        return Plan(refusal=refusal) if refusal else Plan(create=True)
    if spec.partitions < observed.partition_count:
        return Plan(refusal=("PartitionDecreaseNotSupported",
                             f"topic {spec.topic_name} has {observed.partition_count} partitions;"
                             f" Kafka cannot decrease that to {spec.partitions}"))
    # A replication factor change is carried out by partition reassignment (see
    # handlers/topic.py); partitions and configs are brought in line in the same pass.
    replicas_to = spec.replicas if spec.replicas != observed.replication_factor or any(
        len(r) != spec.replicas for r in observed.partitions.values()) else None
    want = spec.config_dict
    set_configs = {k: v for k, v in want.items() if observed.configs.get(k) != v}
    # The operator owns the topic's config: an override not in the spec is removed, except
    # the replication throttles a Cluster's rebalance sets for the length of a move.
    delete = tuple(sorted(k for k in observed.configs
                          if k not in want and k not in REBALANCE_OWNED))
    return Plan(partitions_to=spec.partitions if spec.partitions > observed.partition_count
                else None, set_configs=set_configs, delete_configs=delete,
                replicas_to=replicas_to)


def under_replicated(observed: ObservedTopic) -> list[int]:
    return sorted(p for p, replicas in observed.partitions.items()
                  if len(observed.isr.get(p, ())) < len(replicas))
