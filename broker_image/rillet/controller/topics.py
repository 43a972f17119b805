"""Topic decisions: pure functions from the metadata image and a request to records.

The controller calls them under its lock; nothing here touches the log or the
network, so placement and validation are testable on a hand-built image.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..defs.config_error import ConfigError
from ..metadata import records as mrec
from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..protocol import errors
from ..defs.topic_defs import validate_topic_configs
from .placement import BrokerSlot, PlacementError, assign

# Like KRaft's limit on records per user operation: one request may not add more partitions,
# so a mistyped (or hostile) count cannot stall the controller.
MAX_NEW_PARTITIONS = 10000
_LEGAL_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass
class TopicSpec:
    """A topic to create: its size, or explicit assignments, and configs."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class TopicResult:
    """What creating one topic gave: its id and size, or the error."""
    name: str
    topic_id: uuid.UUID | None = None
    error: errors.KafkaError | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def validate_topic_name(name: str) -> None:
    if not name:
        raise errors.InvalidTopicException("topic name is empty")
    if name in (".", ".."):
        raise errors.InvalidTopicException(f"topic name {name!r} is not allowed")
    if len(name) > 249:
        raise errors.InvalidTopicException(f"topic name is {len(name)} characters, max 249")
    bad = set(name) - _LEGAL_TOPIC_CHARS
    if bad:
        raise errors.InvalidTopicException(
            f"topic name {name!r} contains illegal characters {''.join(sorted(bad))!r}; "
            "allowed: ASCII alphanumerics, '.', '_' and '-'")


def check_new_partitions(count: int) -> None:
    if count > MAX_NEW_PARTITIONS:
        raise errors.InvalidPartitions(
            f"{count} new partitions in one request; at most {MAX_NEW_PARTITIONS} are allowed")


def live_slots(image: MetadataImage) -> list[BrokerSlot]:
    return [BrokerSlot(b.node_id, b.rack) for b in image.live_brokers]


def place(image: MetadataImage, partitions: int, rf: int,
          first_partition: int = 0) -> dict[int, list[int]]:
    """Rack-aware replica lists on the live brokers, starting at a random broker."""
    slots = live_slots(image)
    try:
        return assign(slots, partitions, rf, first_partition=first_partition,
                      start_index=random.randrange(max(len(slots), 1)))
    except PlacementError as exc:
        raise errors.InvalidReplicationFactor(str(exc)) from None


def partition_record(topic_id: uuid.UUID, p: int, replicas: list[int]) -> dict[str, Any]:
    return {"type": mrec.PARTITION, "topic_id": str(topic_id), "partition": p,
            "replicas": replicas, "isr": replicas, "leader": replicas[0],
            "leader_epoch": 0, "partition_epoch": 0}


def check_assignments(image: MetadataImage,
                      assignments: dict[int, list[int]]) -> dict[int, list[int]]:
    if sorted(assignments) != list(range(len(assignments))):
        raise errors.InvalidReplicaAssignment(
            "partition indexes in the assignment must be consecutive from 0")
    sizes = {len(r) for r in assignments.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise errors.InvalidReplicaAssignment(
            "every partition must have the same, non-zero number of replicas")
    for p, replicas in assignments.items():
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignment(f"partition {p} repeats a broker")
        unknown = [b for b in replicas if b not in image.brokers]
        if unknown:
            raise errors.InvalidReplicaAssignment(
                f"partition {p} names unknown broker(s) {unknown}")
        # A fenced broker would start as an in-sync replica it cannot be.
        fenced = [b for b in replicas if b not in image.live_broker_ids]
        if fenced:
            raise errors.InvalidReplicaAssignment(
                f"partition {p} names fenced (not live) broker(s) {fenced}")
    return assignments


def decide_topic(image: MetadataImage, spec: TopicSpec, taken: set[str],
                 defaults: tuple[int, int]) -> tuple[TopicResult, list[dict[str, Any]]]:
    """The records creating `spec` (taken: names created earlier in the same request)."""
    validate_topic_name(spec.name)
    if spec.name in image.topics or spec.name in taken:
        raise errors.TopicAlreadyExists(f"topic {spec.name!r} already exists")
    try:
        configs = validate_topic_configs(spec.configs)
    except ConfigError as exc:
        raise errors.InvalidConfig(str(exc)) from None
    default_partitions, default_rf = defaults
    if spec.assignments:
        if spec.num_partitions != -1 or spec.replication_factor != -1:
            raise errors.InvalidRequest(
                "both assignments and numPartitions/replicationFactor were set")
        check_new_partitions(len(spec.assignments))
        assignment = check_assignments(image, spec.assignments)
    else:
        partitions = default_partitions if spec.num_partitions == -1 else spec.num_partitions
        rf = default_rf if spec.replication_factor == -1 else spec.replication_factor
        if partitions < 1:
            raise errors.InvalidPartitions(f"number of partitions must be >= 1, got {partitions}")
        check_new_partitions(partitions)
        if rf < 1:
            raise errors.InvalidReplicationFactor(f"replication factor must be >= 1, got {rf}")
        assignment = place(image, partitions, rf)
    topic_id = uuid.uuid4()
    recs: list[dict[str, Any]] = [{"type": mrec.TOPIC, "name": spec.name,
                                   "topic_id": str(topic_id)}]
    for p, replicas in sorted(assignment.items()):
        recs.append(partition_record(topic_id, p, replicas))
    for key, value in configs.items():
        recs.append({"type": mrec.CONFIG, "resource_type": TOPIC_RESOURCE,
                     "name": spec.name, "key": key, "value": value})
    rf = len(next(iter(assignment.values())))
    return TopicResult(spec.name, topic_id, None, len(assignment), rf), recs


def decide_new_partitions(image: MetadataImage, name: str, count: int,
                          assignments: list[list[int]] | None) -> list[dict[str, Any]]:
    """The records growing topic `name` to `count` partitions (CreatePartitions)."""
    topic = image.topics.get(name)
    if topic is None:
        raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
    current = len(topic.partitions)
    if count < current:
        raise errors.InvalidPartitions(
            f"topic {name!r} has {current} partitions; cannot decrease to {count}")
    if count == current:
        raise errors.InvalidPartitions(f"topic {name!r} already has {count} partitions")
    check_new_partitions(count - current)
    rf = len(topic.partitions[0].replicas)
    if assignments:
        if len(assignments) != count - current:
            raise errors.InvalidReplicaAssignment(
                f"{len(assignments)} assignments given for {count - current} new partitions")
        if any(len(a) != rf for a in assignments):
            raise errors.InvalidReplicaAssignment(
                f"every new partition of {name!r} needs {rf} replicas, like the existing ones")
        new = check_assignments(image, {i: list(a) for i, a in enumerate(assignments)})
        new = {current + i: a for i, a in new.items()}
    else:
        new = place(image, count - current, rf, first_partition=current)
    return [partition_record(topic.topic_id, p, r) for p, r in sorted(new.items())]
