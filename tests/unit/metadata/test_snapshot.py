"""Snapshots of the metadata image: records that rebuild it, files that refuse corruption."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import SnapshotError, SnapshotStore, image_records

TOPIC_ID = "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11"


def _rich_image() -> MetadataImage:
    records = [
        {"type": r.REGISTER_BROKER, "node_id": 1, "host": "h1", "port": 1, "rack": "a",
         "epoch": 2, "incarnation": "x"},
        {"type": r.REGISTER_BROKER, "node_id": 2, "host": "h2", "port": 2, "rack": "b"},
        {"type": r.REGISTER_BROKER, "node_id": 3, "host": "h3", "port": 3, "rack": None},
        {"type": r.FENCE_BROKER, "node_id": 3},
        {"type": r.TOPIC, "name": "t", "topic_id": TOPIC_ID},
        {"type": r.PARTITION, "topic_id": TOPIC_ID, "partition": 0, "replicas": [1, 2, 3],
         "isr": [1, 2, 3], "leader": 1, "leader_epoch": 0, "partition_epoch": 0},
        {"type": r.PARTITION, "topic_id": TOPIC_ID, "partition": 1, "replicas": [2, 3],
         "isr": [2, 3], "leader": 2, "leader_epoch": 0, "partition_epoch": 0},
        {"type": r.PARTITION_CHANGE, "topic_id": TOPIC_ID, "partition": 0, "isr": [1, 2],
         "leader": 2, "leader_epoch": 1, "adding": [4], "removing": [3]},
        {"type": r.CONFIG, "resource_type": 2, "name": "t", "key": "retention.ms",
         "value": "1000"},
        {"type": r.CONFIG, "resource_type": 4, "name": "", "key": "log.retention.ms",
         "value": "5"},
        {"type": r.PRODUCER_IDS, "next_producer_id": 3000},
    ]
    return replay(MetadataImage(cluster_id="c"), records, 41)


def test_image_records_rebuild_the_image() -> None:
    image = _rich_image()
    rebuilt = replay(MetadataImage(cluster_id="c"), image_records(image), image.offset)
    for field in ("brokers", "topics", "topic_names", "configs"):
        assert dict(getattr(rebuilt, field)) == dict(getattr(image, field)), field
    assert rebuilt.next_producer_id == image.next_producer_id == 3000
    assert rebuilt.topics["t"].partitions[0].partition_epoch == 1
    assert rebuilt.brokers[3].fenced and rebuilt.brokers[1].incarnation == "x"


def test_write_read_and_install_by_chunks(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "a")
    records = image_records(_rich_image())
    store.write(42, 3, records)
    assert store.latest() == (42, 3) and store.read(42, 3) == records
    size = store.size(42, 3)
    chunks = [store.read_chunk(42, 3, pos, 100) for pos in range(0, size, 100)]
    other = SnapshotStore(tmp_path / "b")
    other.install(42, 3, b"".join(chunks))
    assert other.read(42, 3) == records


@pytest.mark.parametrize("damage", [
    lambda d: d[:-10],                                   # torn
    lambda d: d[:60] + bytes([d[60] ^ 1]) + d[61:],      # one bit
    lambda d: d.replace(b'"count":', b'"count":1', 1),   # lying header
])
def test_a_damaged_snapshot_is_refused(tmp_path: Path, damage) -> None:
    store = SnapshotStore(tmp_path / "a")
    path = store.write(42, 3, image_records(_rich_image()))
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SnapshotError):
        store.read(42, 3)
    with pytest.raises(SnapshotError):
        SnapshotStore(tmp_path / "b").install(42, 3, path.read_bytes())


def test_leftovers_and_older_snapshots_are_removed(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    store.write(10, 1, [])
    store.write(20, 2, [])
    (tmp_path / "x.checkpoint.tmp").write_bytes(b"half")
    store = SnapshotStore(tmp_path)
    assert not list(tmp_path.glob("*.tmp"))
    store.delete_older_than(20)
    assert store.snapshots() == [(20, 2)]
