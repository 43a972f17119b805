"""Leader elections asked for (ElectLeaders) or due (auto leader rebalance): pure decisions.

The preferred leader of a partition is its first replica. A PREFERRED election moves
leadership back to it when it is alive and in the ISR; an UNCLEAN election gives a
leaderless partition whose in-sync replicas are all gone to any live replica, which
becomes the whole ISR (acknowledged writes it lacks are lost, as in Kafka). The
periodic rebalance finds brokers that lead too few of the partitions they prefer
(Kafka's leader.imbalance.per.broker.percentage) and elects their preferred leaders.
A replica on a failed log dir (replica_dirs.py) is elected by neither.

Every function maps an image (and a request) to records plus per-partition outcomes;
nothing here touches the log, so the controller commits what it gets.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors
from .election import NO_LEADER, partition_change

PREFERRED, UNCLEAN = 0, 1


@dataclass(frozen=True)
class ElectionOutcome:
    """One partition's answer: error None means a new leader was elected."""
    topic: str
    partition: int
    error: errors.KafkaError | None = None


def elect(image: MetadataImage, part: PartitionInfo, election_type: int) -> dict[str, Any]:
    """The record electing a new leader of `part`, or the KafkaError saying why not."""
    live = image.live_broker_ids
    if election_type == PREFERRED:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if part.leader == preferred:
            raise errors.ElectionNotNeeded("the preferred replica already leads")
        if preferred not in live or preferred not in part.isr or part.on_lost_dir(preferred):
            state = "not alive" if preferred not in live else "not in the ISR" \
                if preferred not in part.isr else "on a failed log dir"
            raise errors.PreferredLeaderNotAvailable(
                f"preferred replica {preferred} is {state} (ISR {list(part.isr)})")
        return partition_change(part, leader=preferred, leader_epoch=part.leader_epoch + 1)
    if election_type == UNCLEAN:
        if part.leader != NO_LEADER and part.leader in live:
            raise errors.ElectionNotNeeded(f"broker {part.leader} leads and is alive")
        # A replica on a failed log dir has nothing to serve (replica_dirs.py).
        live = frozenset(b for b in live if not part.on_lost_dir(b))
        clean = next((b for b in part.isr if b in live), NO_LEADER)
        if clean != NO_LEADER:
            # An in-sync replica is alive: a clean election, nothing is lost.
            return partition_change(part, leader=clean, leader_epoch=part.leader_epoch + 1)
        chosen = next((b for b in part.replicas if b in live), NO_LEADER)
        if chosen == NO_LEADER:
            raise errors.EligibleLeadersNotAvailable(
                f"no replica of {list(part.replicas)} is alive on a working log dir")
        return partition_change(part, leader=chosen, isr=(chosen,),
                                leader_epoch=part.leader_epoch + 1)
    raise errors.InvalidRequest(f"unknown election type {election_type}")


def decide_elections(image: MetadataImage, election_type: int,
                     wanted: Iterable[tuple[str, int]] | None
                     ) -> tuple[list[ElectionOutcome], list[dict[str, Any]]]:
    """ElectLeaders: outcomes and records for `wanted` partitions (None: all of them).

    Asked for every partition, partitions whose leader is already right are left out of
    the answer, as Kafka does."""
    everything = wanted is None
    if wanted is None:
        wanted = [(t.name, p) for t in image.topics.values() for p in sorted(t.partitions)]
    outcomes: list[ElectionOutcome] = []
    records: list[dict[str, Any]] = []
    for topic, p in dict.fromkeys(wanted):
        part = image.partition(topic, p)
        if part is None:
            outcomes.append(ElectionOutcome(topic, p, errors.UnknownTopicOrPartition(
                f"{topic}-{p} does not exist")))
            continue
        try:
            records.append(elect(image, part, election_type))
        except errors.KafkaError as exc:
            if not (everything and isinstance(exc, errors.ElectionNotNeeded)):
                outcomes.append(ElectionOutcome(topic, p, exc))
            continue
        outcomes.append(ElectionOutcome(topic, p))
    return outcomes, records


def imbalance(image: MetadataImage) -> dict[int, tuple[int, int]]:
    """Preferred broker -> (partitions it prefers but does not lead, partitions it prefers)."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if not part.replicas:
                continue
            entry = counts[part.replicas[0]]
            entry[1] += 1
            if part.leader != part.replicas[0]:
                entry[0] += 1
    return {b: (c[0], c[1]) for b, c in counts.items()}


def rebalance(image: MetadataImage, per_broker_percentage: int
              ) -> tuple[list[tuple[str, int]], list[dict[str, Any]]]:
    """The preferred elections due: for each broker whose share of partitions it prefers but
    does not lead exceeds the percentage, every such partition it can take back now."""
    due = {b for b, (off, total) in imbalance(image).items()
           if total and off * 100 > per_broker_percentage * total}
    moved: list[tuple[str, int]] = []
    records: list[dict[str, Any]] = []
    for topic in image.topics.values():
        for p, part in sorted(topic.partitions.items()):
            if not part.replicas or part.replicas[0] not in due:
                continue
            try:
                records.append(elect(image, part, PREFERRED))
            except errors.KafkaError:
                continue   # it leads already, or is not back in the ISR yet
            moved.append((topic.name, p))
    return moved, records
