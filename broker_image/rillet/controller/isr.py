"""ISR changes (AlterPartition): one leader's batch of proposals, decided per partition.

A leader sends every ISR change it wants in one request (replication/alter_partition_manager.py).
Each partition is checked on its own against the image, as Kafka's
ReplicationControlManager does: a stale leader epoch (FENCED_LEADER_EPOCH), a stale
partition epoch (INVALID_UPDATE_VERSION), a replica that is fenced or unknown, or on a
failed log dir (replica_dirs.py), joining (INELIGIBLE_REPLICA) fail only that partition; every accepted one becomes one record,
and the controller commits them all as one metadata batch.

Pure: the image and the request in, (answers, records) out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..metadata.image import MetadataImage
from ..protocol import errors
from . import reassignment

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request: the ISR a leader wants, and the epochs
    of the partition state it decided that from."""
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition


# One answer per change, in request order: None = accepted (committed with the batch).
IsrAnswer = errors.KafkaError | None


def check(image: MetadataImage, leader_id: int, change: IsrChange,
          live: frozenset[int] | None = None) -> None:
    """Raise the error Kafka answers for `change`, or return when it may be applied.
    `live`: the image's live brokers, when the caller already has them (one request's
    thousands of changes share one set)."""
    name = f"{change.topic}-{change.partition}"
    part = image.partition(change.topic, change.partition)
    if part is None:
        raise errors.UnknownTopicOrPartition(f"{name} does not exist")
    if (part.leader, part.leader_epoch) != (leader_id, change.leader_epoch):
        raise errors.FencedLeaderEpoch(
            f"{name} is led by {part.leader} in epoch {part.leader_epoch}, "
            f"not {leader_id} in {change.leader_epoch}")
    if part.partition_epoch != change.partition_epoch:
        raise errors.InvalidUpdateVersion(
            f"{name} is at partition epoch {part.partition_epoch}, the change was made "
            f"for {change.partition_epoch}")
    isr = change.new_isr
    if leader_id not in isr or not set(isr) <= set(part.replicas) or len(set(isr)) != len(isr):
        raise errors.InvalidRequest(f"ISR {list(isr)} must hold the leader and only "
                                    f"replicas of {name}, each once")
    if live is None:
        live = image.live_broker_ids
    joining = [b for b in isr if b not in part.isr and b not in live]
    if joining:
        raise errors.IneligibleReplica(f"broker(s) {joining} are fenced or unknown")
    lost = [b for b in isr if b not in part.isr and part.on_lost_dir(b)]
    if lost:
        raise errors.IneligibleReplica(f"broker(s) {lost} hold {name} on a failed log dir")


def decide(image: MetadataImage, leader_id: int, changes: Sequence[IsrChange]
           ) -> tuple[list[IsrAnswer], list[dict[str, Any]]]:
    """Answers (one per change, in order) and the records of the accepted ones.

    A partition named twice in one request is refused the second time (INVALID_REQUEST):
    both were decided from the same partition epoch, so at most one can be right."""
    answers: list[IsrAnswer] = []
    records: list[dict[str, Any]] = []
    seen: set[TopicPartition] = set()
    live = image.live_broker_ids
    for change in changes:
        try:
            if change.tp in seen:
                raise errors.InvalidRequest(
                    f"{change.topic}-{change.partition} appears twice in one request")
            seen.add(change.tp)
            check(image, leader_id, change, live)
        except errors.KafkaError as exc:
            answers.append(exc)
            continue
        part = image.partition(change.topic, change.partition)
        assert part is not None   # check() refuses an unknown partition
        # An ISR that now holds every target replica also completes a move (one record).
        records.append(reassignment.with_isr(part, change.new_isr, live))
        answers.append(None)
    return answers, records


def summary(changes: Iterable[IsrChange], answers: Iterable[IsrAnswer]) -> str:
    """One log line for a request: "12 accepted, 1 refused (t-3: InvalidUpdateVersion)"."""
    accepted = 0
    refused: list[str] = []
    for change, answer in zip(changes, answers):
        if answer is None:
            accepted += 1
        else:
            refused.append(f"{change.topic}-{change.partition}: {type(answer).__name__}")
    text = f"{accepted} accepted"
    if refused:
        shown = ", ".join(refused[:5]) + (f", {len(refused) - 5} more" if len(refused) > 5 else "")
        text += f", {len(refused)} refused ({shown})"
    return text
