"""A broker's replicas on a failed log dir: leadership and ISR slots move to other brokers.

The controller's input for Kafka's log-dir-offline path (KIP-858): a broker whose log dir
failed (storage/log_dir_failure.py) assigns the partitions it held to the directory id
LOST with AssignReplicasToDirs; the controller then treats those replicas as it treats a
fenced broker's (election.leave_partition), for those partitions only: the broker stays
live and keeps leading what its other dirs hold. A partition with no other in-sync
replica keeps its ISR and gets no leader (-1) here, unless unclean election is allowed.
Known gap: the controller does not remember the lost replica afterwards, so a later
preferred or unclean election may pick that broker again while it is the ISR's only live
member; its answers are then KAFKA_STORAGE_ERROR until it restarts on a repaired disk.

rillet does not track which dir holds which replica: an assignment to any other
directory id is accepted and changes nothing. Pure: image in, records out.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable

from ..metadata.image import MetadataImage
from ..protocol import errors
from .election import leave_partition

# Kafka's DirectoryId.LOST: "the replica's directory is offline".
LOST_DIR = uuid.UUID("00000000-0000-0000-0000-000000000001")

TopicPartition = tuple[str, int]


def decide(image: MetadataImage, node_id: int, tps: Iterable[TopicPartition],
           unclean: Callable[[str], bool]
           ) -> tuple[dict[TopicPartition, errors.KafkaError | None], list[dict[str, Any]]]:
    """(answer per partition, records) for `node_id`'s replicas of `tps` gone offline."""
    live = image.live_broker_ids - {node_id}
    answers: dict[TopicPartition, errors.KafkaError | None] = {}
    records = []
    for topic, p in tps:
        part = image.partition(topic, p)
        if part is None:
            answers[(topic, p)] = errors.UnknownTopicOrPartition(f"no partition {topic}-{p}")
            continue
        if node_id not in part.replicas:
            answers[(topic, p)] = errors.NotLeaderOrFollower(
                f"broker {node_id} holds no replica of {topic}-{p}")
            continue
        answers[(topic, p)] = None
        rec = leave_partition(part, node_id, live, lambda t=topic: unclean(t))
        if rec is not None:
            records.append(rec)
    return answers, records
