"""AssignReplicasToDirs on the controller: which log dir holds each of a broker's replicas.

A broker names the directory id of each replica it made (metadata/directories.py); the
partition's `directories` record it, so every node and every later controller knows it from
the metadata log. A broker whose log dir failed (storage/log_dir_failure.py), or that finds
at start a replica's dir unreadable or gone, assigns those replicas to LOST: the controller
then treats them as it treats a fenced broker's (election.leave_partition), for those
partitions only, and remembers it: a replica on a LOST dir is never elected leader and
never rejoins the ISR (election.py, leader_balance.py, isr.py ask `on_lost_dir`) until the
broker, restarted on a repaired disk, assigns it to a real dir again. The broker stays
live and keeps leading what its other dirs hold. A partition with no other in-sync replica
keeps its ISR and gets no leader (-1), unless unclean election is allowed; when its lost
replica comes back it leads again (it holds every acknowledged record).

Pure: image in, records out.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Mapping

from ..metadata import directories as dirs
from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors
from .election import NO_LEADER, leave_partition, partition_change

TopicPartition = tuple[str, int]


def decide(image: MetadataImage, node_id: int, assignments: Mapping[TopicPartition, uuid.UUID],
           unclean: Callable[[str], bool]
           ) -> tuple[dict[TopicPartition, errors.KafkaError | None], list[dict[str, Any]]]:
    """(answer per partition, records) for `node_id`'s replicas now in these dirs."""
    live = image.live_broker_ids - {node_id}
    answers: dict[TopicPartition, errors.KafkaError | None] = {}
    records = []
    for (topic, p), directory in assignments.items():
        part = image.partition(topic, p)
        if part is None:
            answers[(topic, p)] = errors.UnknownTopicOrPartition(f"no partition {topic}-{p}")
            continue
        if node_id not in part.replicas:
            answers[(topic, p)] = errors.NotLeaderOrFollower(
                f"broker {node_id} holds no replica of {topic}-{p}")
            continue
        if directory == dirs.UNASSIGNED:
            answers[(topic, p)] = errors.InvalidRequest("a replica cannot be unassigned")
            continue
        answers[(topic, p)] = None
        rec = _assign(part, node_id, directory, live, node_id in image.live_broker_ids,
                      lambda t=topic: unclean(t))
        if rec is not None:
            records.append(rec)
    return answers, records


def _assign(part: PartitionInfo, node_id: int, directory: uuid.UUID, live: frozenset[int],
            node_live: bool, unclean: Callable[[], bool]) -> dict[str, Any] | None:
    """The record putting `node_id`'s replica of `part` in `directory` (None: no change)."""
    if part.directory_of(node_id) == directory:
        return None
    placed = dirs.to_record(dirs.with_directory(part.replicas, part.directories, node_id,
                                                directory))
    if directory == dirs.LOST:
        rec = leave_partition(part, node_id, live, unclean) or partition_change(part)
    elif node_live and part.leader == NO_LEADER and part.on_lost_dir(node_id) \
            and node_id in part.isr:
        # Back on a repaired disk, the last in-sync replica: it holds every acknowledged
        # record, so it leads again (with no leader, nobody else could have taken writes).
        # A fenced broker is given it when unfenced (election.on_broker_returning).
        rec = partition_change(part, leader=node_id, leader_epoch=part.leader_epoch + 1)
    else:
        rec = partition_change(part)
    rec["directories"] = placed
    return rec
