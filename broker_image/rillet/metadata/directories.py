"""Which log dir holds each replica (KIP-858, JBOD): directory ids and their two sentinels.

Every log dir has a directory id (`directory.id` in its meta.properties, storage_format.py).
A partition's metadata keeps, beside its replicas and in the same order, the directory id
of the dir holding each one: UNASSIGNED until the broker has made the replica's log (or in
metadata written before rillet tracked dirs), LOST once the broker reported its dir failed.
The broker fills it in with AssignReplicasToDirs after it creates a log, so a replica's
directory changes only there (rillet has no AlterReplicaLogDirs to move one between dirs).

What it is for: a broker never makes a replica assigned to a dir it cannot read again
elsewhere (empty, it would pass for the replica and lose its data), and the controller never
lets a replica on a LOST dir lead or stay in sync. Pure; the image stores `uuid.UUID`s,
records their strings.
"""
from __future__ import annotations

import uuid
from typing import Iterable, Sequence

# Kafka's DirectoryId.UNASSIGNED and DirectoryId.LOST.
UNASSIGNED = uuid.UUID(int=0)
LOST = uuid.UUID(int=1)
RESERVED = frozenset({UNASSIGNED, LOST, uuid.UUID(int=2)})   # 2: Kafka's MIGRATING


def new_directory_id() -> uuid.UUID:
    """A random id that is none of the reserved ones."""
    while True:
        candidate = uuid.uuid4()
        if candidate not in RESERVED:
            return candidate


def directory_of(replicas: Sequence[int], directories: Sequence[uuid.UUID],
                 broker: int) -> uuid.UUID:
    """The dir id of `broker`'s replica (UNASSIGNED when none is recorded)."""
    if directories:
        for b, d in zip(replicas, directories):
            if b == broker:
                return d
    return UNASSIGNED


def with_directory(replicas: Sequence[int], directories: Sequence[uuid.UUID], broker: int,
                   directory: uuid.UUID) -> tuple[uuid.UUID, ...]:
    """`directories` with `broker`'s replica in `directory`."""
    current = realign(replicas, directories, replicas)
    return tuple(directory if b == broker else d for b, d in zip(replicas, current))


def realign(old_replicas: Sequence[int], old_directories: Sequence[uuid.UUID],
            new_replicas: Iterable[int]) -> tuple[uuid.UUID, ...]:
    """The directories of `new_replicas` after a replica set change: a broker that keeps its
    replica keeps its dir, a new one starts UNASSIGNED."""
    return tuple(directory_of(old_replicas, old_directories, b) for b in new_replicas)


def to_record(directories: Sequence[uuid.UUID]) -> list[str]:
    return [str(d) for d in directories]


def from_record(values: Iterable[str]) -> tuple[uuid.UUID, ...]:
    return tuple(uuid.UUID(v) for v in values)
