"""Partition reassignment (KIP-455): pure functions from the image and a request to records.

A move goes through three states, all of them in the metadata image (so a new active
controller, or a restarted node, picks a move up where it was):

1. start: replicas = target + the current replicas not in the target (Kafka's order),
   adding = target - current, removing = current - target. The adding replicas create
   their logs and fetch from the leader; they are not in the ISR, so they hold back
   neither the high watermark nor min.insync.replicas.
2. the leader adds each caught-up replica to the ISR (AlterPartition).
3. complete, as soon as the ISR without the removing replicas holds every target
   replica: replicas = target, ISR = ISR minus removing, adding/removing cleared. A
   leader being removed hands over in that same record to the first target replica in
   the ISR, so the partition never has a leader outside its replicas.

Cancel (null target) reverts to the original replicas (the current ones minus adding),
with the ISR minus adding; the leader is re-elected if it was an adding replica.
Shrinking the replica set always bumps the leader epoch (as Kafka's
PartitionChangeBuilder), so followers and fetchers of the old set are fenced off.
Behaviour follows Kafka's ReplicationControlManager, PartitionChangeBuilder and
PartitionReassignmentReplicas/Revert; the code is rillet's own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors
from .election import NO_LEADER, partition_change


@dataclass(frozen=True)
class PartitionState:
    """The replica fields of a partition that a reassignment decides."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, part: PartitionInfo) -> "PartitionState":
        return cls(part.replicas, part.isr, part.leader, part.adding, part.removing)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass(frozen=True)
class Ongoing:
    """One partition's reassignment, as ListPartitionReassignments reports it."""
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def is_reassigning(part: PartitionInfo) -> bool:
    return bool(part.adding or part.removing)


# -- the states ------------------------------------------------------------------------------

def started(current: PartitionState, target: tuple[int, ...]) -> PartitionState:
    """The state once a move from `current.replicas` to `target` starts (not yet completed).

    A move asked for while another is in progress starts from the current (union)
    replicas, as Kafka does: adding replicas the new target drops become removing ones.
    """
    removing = tuple(sorted(set(current.replicas) - set(target)))
    adding = tuple(sorted(set(target) - set(current.replicas)))
    replicas = tuple(target) + tuple(r for r in current.replicas if r not in target)
    return PartitionState(replicas, current.isr, current.leader, adding, removing)


def completed(state: PartitionState) -> PartitionState | None:
    """The state with the move finished, or None while a target replica is not in sync."""
    if not state.reassigning:
        return None
    isr = tuple(r for r in state.isr if r not in state.removing)
    replicas = tuple(r for r in state.replicas if r not in state.removing)
    if not isr or not replicas or not set(replicas) <= set(isr):
        return None
    return PartitionState(replicas, isr, state.leader)


def reverted(state: PartitionState) -> tuple[PartitionState, bool]:
    """The state with the move cancelled, and whether that needs an unclean election
    (every in-sync replica was an adding one)."""
    replicas = tuple(r for r in state.replicas if r not in state.adding)
    if not replicas:
        raise errors.InvalidReplicaAssignment("every replica of the partition is being added")
    isr = tuple(r for r in state.isr if r not in state.adding)
    unclean = not isr
    return PartitionState(replicas, isr or replicas[:1], state.leader), unclean


def elect(state: PartitionState, live: frozenset[int]) -> int:
    """The leader of `state`: the current one while it is a live in-sync replica, else the
    first live in-sync replica in replica order (the target's order during a move)."""
    def valid(b: int) -> bool:
        return b in state.isr and b in state.replicas and b in live

    if valid(state.leader):
        return state.leader
    return next((b for b in state.replicas if valid(b)), NO_LEADER)


def change_record(part: PartitionInfo, state: PartitionState,
                  live: frozenset[int]) -> dict[str, Any] | None:
    """The PARTITION_CHANGE taking `part` to `state` (completed if it can be, leader
    elected), or None when nothing changes."""
    state = completed(state) or state
    # A replica on a failed log dir may not lead (replica_dirs.py).
    leader = elect(state, frozenset(b for b in live if not part.on_lost_dir(b)))
    fields: dict[str, Any] = {}
    if state.replicas != part.replicas:
        fields["replicas"] = state.replicas
    if state.isr != part.isr:
        fields["isr"] = state.isr
    if state.adding != part.adding:
        fields["adding"] = state.adding
    if state.removing != part.removing:
        fields["removing"] = state.removing
    # A new leader, or a replica set that lost members, gets a new leader epoch: the
    # dropped replicas and everyone who fetched in the old epoch must notice.
    if leader != part.leader or not set(part.replicas) <= set(state.replicas):
        fields["leader"] = leader
        fields["leader_epoch"] = part.leader_epoch + 1
    if not fields:
        return None
    return partition_change(part, **fields)


# -- requests --------------------------------------------------------------------------------

def validate_target(image: MetadataImage, replicas: Iterable[int]) -> tuple[int, ...]:
    target = tuple(replicas)
    if not target:
        raise errors.InvalidReplicaAssignment("the target replica list is empty")
    seen: set[int] = set()
    for b in target:
        if b in seen:
            raise errors.InvalidReplicaAssignment(f"broker {b} appears more than once")
        seen.add(b)
        if b not in image.brokers:
            raise errors.InvalidReplicaAssignment(f"broker {b} is not registered")
    return target


def decide(image: MetadataImage, topic: str, partition: int, replicas: Iterable[int] | None,
           unclean_allowed: bool = False) -> dict[str, Any] | None:
    """The record starting (or, with replicas None, cancelling) a move; None for a no-op.

    Raises UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT or
    NO_REASSIGNMENT_IN_PROGRESS as Kafka's controller does.
    """
    part = image.partition(topic, partition)
    if part is None:
        raise errors.UnknownTopicOrPartition(f"{topic}-{partition} does not exist")
    current = PartitionState.of(part)
    live = image.live_broker_ids
    if replicas is None:
        if not current.reassigning:
            raise errors.NoReassignmentInProgress(
                f"no reassignment of {topic}-{partition} is in progress")
        state, unclean = reverted(current)
        if unclean and not unclean_allowed:
            raise errors.InvalidReplicaAssignment(
                f"cancelling the move of {topic}-{partition} would need an unclean leader "
                f"election: every in-sync replica is one being added")
        return change_record(part, state, live)
    target = validate_target(image, replicas)
    return change_record(part, started(current, target), live)


def with_isr(part: PartitionInfo, isr: tuple[int, ...],
             live: frozenset[int]) -> dict[str, Any]:
    """The record of an ISR change (AlterPartition), completing a move it makes complete."""
    state = PartitionState.of(part)
    new = PartitionState(state.replicas, tuple(isr), state.leader, state.adding, state.removing)
    if completed(new) is None:
        return partition_change(part, isr=tuple(isr))
    record = change_record(part, new, live)
    assert record is not None   # completion changes the replicas or the ISR
    return record


def completions(image: MetadataImage) -> list[dict[str, Any]]:
    """Records finishing every move whose ISR already allows it (a new active controller,
    a returning broker: nothing may wait for an AlterPartition that already happened)."""
    live = image.live_broker_ids
    out = []
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if not is_reassigning(part):
                continue
            state = PartitionState.of(part)
            if completed(state) is not None:
                record = change_record(part, state, live)
                if record is not None:
                    out.append(record)
    return out


def ongoing(image: MetadataImage,
            wanted: Iterable[tuple[str, Iterable[int]]] | None = None) -> Iterator[Ongoing]:
    """Partitions being moved: all of them, or those of `wanted` (topic, partitions);
    unknown topics and partitions are left out, as Kafka does."""
    if wanted is None:
        pairs: Iterable[tuple[str, Iterable[int]]] = (
            (name, sorted(t.partitions)) for name, t in sorted(image.topics.items()))
    else:
        pairs = wanted
    for name, partitions in pairs:
        topic = image.topics.get(name)
        if topic is None:
            continue
        for p in partitions:
            part = topic.partitions.get(p)
            if part is not None and is_reassigning(part):
                yield Ongoing(name, p, part.replicas, part.adding, part.removing)
