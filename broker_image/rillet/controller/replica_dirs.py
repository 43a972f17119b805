"""AssignReplicasToDirs on the controller: which log dir holds each of a broker's replicas.

A broker names the directory id of each replica it made (metadata/directories.py); the
partition's `directories` record it, so every node and every later controller knows it from
the metadata log. A broker whose log dir failed (storage/log_dir_failure.py), or that finds
at start a replica's dir unreadable (storage/manager.py), assigns those replicas to LOST: the controller
then treats them as it treats a fenced broker's (election.leave_partition), for those
partitions only, and remembers it: a replica on a LOST dir is never elected leader and
never rejoins the ISR (election.py, leader_balance.py, isr.py ask `on_lost_dir`) until the
broker, restarted on a repaired disk, assigns it to a real dir again. The broker stays
live and keeps leading what its other dirs hold. A partition with no other in-sync replica
keeps its ISR and gets no leader (-1), unless unclean election is allowed; once its lost
replica is assigned to a real dir again it may lead (election.on_broker_returning gives it
the leadership when its broker is unfenced: a restarted broker assigns its replicas
before its first heartbeat).

A broker also names its offline dirs in every heartbeat (BrokerHeartbeat v1+,
OfflineLogDirs, as Kafka 3.7+): `offline_replicas` finds its replicas still assigned to one
of them, which the controller then assigns to LOST as above. Its AssignReplicasToDirs
usually got there first; the heartbeat is the backstop (a lost or refused assignment, a new
active controller), and what a Kafka broker sends.

Pure: image in, records out.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Collection, Mapping

from ..metadata import directories as dirs
from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors
from .election import leave_partition, partition_change

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
        rec = _assign(part, node_id, directory, live, lambda t=topic: unclean(t))
        if rec is not None:
            records.append(rec)
    return answers, records


def offline_replicas(image: MetadataImage, node_id: int, offline: Collection[uuid.UUID]
                     ) -> dict[TopicPartition, uuid.UUID]:
    """`node_id`'s replicas assigned to one of its `offline` dirs, each to LOST (those
    LOST already, or in no named dir, are left out)."""
    named = frozenset(offline) - dirs.RESERVED
    if not named:
        return {}
    return {(name, p): dirs.LOST for name, topic in image.topics.items()
            for p, part in topic.partitions.items()
            if node_id in part.replicas and part.directory_of(node_id) in named}


def _assign(part: PartitionInfo, node_id: int, directory: uuid.UUID, live: frozenset[int],
            unclean: Callable[[], bool]) -> dict[str, Any] | None:
    """The record putting `node_id`'s replica of `part` in `directory` (None: no change)."""
    if part.directory_of(node_id) == directory:
        return None
    placed = dirs.to_record(dirs.with_directory(part.replicas, part.directories, node_id,
                                                directory))
    if directory == dirs.LOST:
        rec = leave_partition(part, node_id, live, unclean) or partition_change(part)
    else:
        rec = partition_change(part)
    rec["directories"] = placed
    return rec
