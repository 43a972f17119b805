"""metadata/directories.py and the image's `directories`: which log dir holds each replica,
through partition changes and snapshots."""
from __future__ import annotations

import uuid

from rillet.metadata import directories as dirs
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import image_records

TID = "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11"
D1, D2 = uuid.UUID(int=77), uuid.UUID(int=78)


def test_new_ids_are_never_reserved() -> None:
    assert all(dirs.new_directory_id() not in dirs.RESERVED for _ in range(100))


def test_a_broker_keeps_its_dir_through_a_replica_set_change() -> None:
    assert dirs.directory_of((1, 2), (), 2) == dirs.UNASSIGNED
    placed = dirs.with_directory((1, 2, 3), (), 2, D1)
    assert placed == (dirs.UNASSIGNED, D1, dirs.UNASSIGNED)
    assert dirs.realign((1, 2, 3), placed, (4, 2)) == (dirs.UNASSIGNED, D1)
    assert dirs.directory_of((1, 2, 3), placed, 9) == dirs.UNASSIGNED


def _image() -> MetadataImage:
    return replay(MetadataImage("c"), [
        {"type": r.TOPIC, "name": "a", "topic_id": TID},
        {"type": r.PARTITION, "topic_id": TID, "partition": 0, "replicas": [1, 2, 3],
         "isr": [1, 2, 3], "leader": 1, "leader_epoch": 0, "partition_epoch": 0,
         "directories": [str(D1), str(dirs.LOST), str(dirs.UNASSIGNED)]}], 0)


def test_directories_are_replayed_and_follow_the_replicas() -> None:
    part = _image().partition("a", 0)
    assert part is not None and part.directory_of(1) == D1 and part.on_lost_dir(2)
    moved = replay(_image(), [{"type": r.PARTITION_CHANGE, "topic_id": TID, "partition": 0,
                               "replicas": [3, 1]}], 1).partition("a", 0)
    assert moved is not None and moved.directories == (dirs.UNASSIGNED, D1)
    set_ = replay(_image(), [{"type": r.PARTITION_CHANGE, "topic_id": TID, "partition": 0,
                              "directories": [str(D2), str(D2), str(D2)]}], 1).partition("a", 0)
    assert set_ is not None and set_.directories == (D2, D2, D2)
    assert set_.partition_epoch == 1


def test_directories_survive_a_snapshot() -> None:
    image = _image()
    again = replay(MetadataImage("c"), image_records(image), 5)
    assert again.partition("a", 0) == image.partition("a", 0)
