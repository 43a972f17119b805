"""Snapshots of the metadata image: records that rebuild it, files that refuse corruption."""
from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet.metadata import records as r
from rillet.metadata.image import (BROKER_RESOURCE, TOPIC_RESOURCE, BrokerInfo, MetadataImage,
                                   PartitionInfo, replay)
from rillet.metadata.snapshot import SnapshotError, SnapshotStore, image_records

T1 = "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11"
T2 = "0b8f3c1d-7a64-4e0e-8f3b-5d2a9c4e7f20"


def _broker(node_id: int, rack: str | None, **extra: Any) -> dict[str, Any]:
    return {"type": r.REGISTER_BROKER, "node_id": node_id, "host": f"h{node_id}",
            "port": 9090 + node_id, "rack": rack, **extra}


def _partition(topic_id: str, p: int, replicas: list[int]) -> dict[str, Any]:
    return {"type": r.PARTITION, "topic_id": topic_id, "partition": p, "replicas": replicas,
            "isr": replicas, "leader": replicas[0], "leader_epoch": 0, "partition_epoch": 0}


def _config(resource_type: int, name: str, key: str, value: str | None) -> dict[str, Any]:
    return {"type": r.CONFIG, "resource_type": resource_type, "name": name, "key": key,
            "value": value}


RICH_HISTORY: list[list[dict[str, Any]]] = [
    [_broker(1, "a", epoch=2, incarnation="x"), _broker(2, "b"), _broker(3, "a"),
     _broker(4, None)],
    [{"type": r.TOPIC, "name": "orders", "topic_id": T1}]
    + [_partition(T1, p, [1 + p % 4, 1 + (p + 1) % 4, 1 + (p + 2) % 4]) for p in range(4)]
    + [{"type": r.TOPIC, "name": "__consumer_offsets", "topic_id": T2},
       _partition(T2, 0, [2, 3])],
    [{"type": r.FENCE_BROKER, "node_id": 3},
     {"type": r.PARTITION_CHANGE, "topic_id": T1, "partition": 0, "isr": [1, 2],
      "leader": 2, "leader_epoch": 1}],
    [{"type": r.PARTITION_CHANGE, "topic_id": T1, "partition": 0, "replicas": [1, 2, 3, 4],
      "adding": [4], "removing": [3]},
     {"type": r.PARTITION_CHANGE, "topic_id": T1, "partition": 2, "isr": [3]},
     _broker(2, "b", epoch=7),  # re-registration, later than the others
     _config(TOPIC_RESOURCE, "orders", "retention.ms", "1000"),
     _config(TOPIC_RESOURCE, "orders", "cleanup.policy", "compact"),
     _config(TOPIC_RESOURCE, "orders", "cleanup.policy", None),
     _config(TOPIC_RESOURCE, "orders", "segment.bytes", "4096"),
     _config(BROKER_RESOURCE, "", "log.retention.ms", "5"),
     _config(BROKER_RESOURCE, "2", "log.cleaner.threads", "2"),
     {"type": r.PRODUCER_IDS, "next_producer_id": 3000}],
]


def _replayed(history: list[list[dict[str, Any]]], cluster_id: str = "c") -> MetadataImage:
    """The image after each batch committed in turn, one offset per record."""
    image, offset = MetadataImage(cluster_id=cluster_id), -1
    for batch in filter(None, history):
        offset += len(batch)
        image = replay(image, batch, offset)
    return image


def _rebuilt(image: MetadataImage) -> MetadataImage:
    return replay(MetadataImage(cluster_id=image.cluster_id), image_records(image), image.offset)


# -- image <-> records -----------------------------------------------------------------------

def test_image_records_rebuild_a_rich_image() -> None:
    image = _replayed(RICH_HISTORY)
    rebuilt = _rebuilt(image)
    assert rebuilt == image
    p0 = rebuilt.partition("orders", 0)
    assert p0.partition_epoch == 2 and p0.isr == (1, 2) and p0.leader == 2
    assert (p0.replicas, p0.adding, p0.removing) == ((1, 2, 3, 4), (4,), (3,))
    assert rebuilt.partition("orders", 2).partition_epoch == 1
    assert rebuilt.brokers[3].fenced and rebuilt.brokers[2].epoch == 7
    assert rebuilt.brokers[1].incarnation == "x" and rebuilt.brokers[4].rack is None
    assert rebuilt.topic_config("orders") == {"retention.ms": "1000", "segment.bytes": "4096"}
    assert rebuilt.configs[(BROKER_RESOURCE, "")] == {"log.retention.ms": "5"}
    assert rebuilt.next_producer_id == 3000 and rebuilt.offset == image.offset


def test_registered_offset_survives_a_snapshot() -> None:
    # Replayed as one batch, every broker would get the offset after the snapshot (23).
    rebuilt = _rebuilt(_replayed(RICH_HISTORY))
    assert {n: b.registered_offset for n, b in rebuilt.brokers.items()} == {
        1: 4, 2: 23, 3: 4, 4: 4}


def test_image_records_are_deterministic() -> None:
    image = _replayed(RICH_HISTORY)
    shuffled = replace(image, topics=dict(reversed(image.topics.items())),
                       brokers=dict(reversed(image.brokers.items())))
    assert image_records(shuffled) == image_records(image)
    assert [rec["type"] for rec in image_records(MetadataImage(cluster_id="c"))] == []


def test_every_broker_and_partition_field_is_written() -> None:
    # A field added to BrokerInfo or PartitionInfo must reach the snapshot too.
    records = image_records(_replayed(RICH_HISTORY))
    by_type = {rec["type"]: set(rec) for rec in records}
    assert {f.name for f in fields(BrokerInfo)} <= by_type[r.REGISTER_BROKER]
    assert {f.name for f in fields(PartitionInfo)} <= by_type[r.PARTITION]


replica_sets = st.lists(st.integers(0, 4), max_size=4, unique=True)
short_text = st.text(max_size=6)
steps = st.one_of(
    st.tuples(st.just("broker"), st.integers(0, 4), st.none() | short_text,
              st.integers(0, 9), st.booleans(), st.none() | short_text),
    st.tuples(st.just("fence"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("unregister"), st.integers(0, 4)),
    st.tuples(st.just("topic"), st.sampled_from(["a", "b", "__c"]), st.uuids(),
              st.integers(0, 4), replica_sets, st.integers(0, 3)),
    st.tuples(st.just("change"), st.sampled_from(["a", "b", "__c"]), st.integers(0, 3),
              st.fixed_dictionaries({}, optional={
                  "replicas": replica_sets, "isr": replica_sets, "leader": st.integers(-1, 4),
                  "leader_epoch": st.integers(0, 9), "adding": replica_sets,
                  "removing": replica_sets})),
    st.tuples(st.just("remove"), st.sampled_from(["a", "b", "__c"])),
    st.tuples(st.just("config"), st.sampled_from([TOPIC_RESOURCE, BROKER_RESOURCE]),
              st.sampled_from(["a", "b", "", "1"]), st.sampled_from(["k1", "k2"]),
              st.none() | short_text),
    st.tuples(st.just("producer_ids"), st.integers(0, 10_000)),
    st.tuples(st.just("commit")),
)


def _history(ops: list[tuple[Any, ...]]) -> list[list[dict[str, Any]]]:
    """Batches of records a controller could have written: only known topics are changed."""
    topics: dict[str, tuple[str, int]] = {}  # name -> (topic id, partition count)
    history: list[list[dict[str, Any]]] = [[]]
    for kind, *args in ops:
        batch = history[-1]
        if kind == "commit":
            history.append([])
        elif kind == "broker":
            node, rack, epoch, fenced, incarnation = args
            batch.append(_broker(node, rack, epoch=epoch, fenced=fenced,
                                 incarnation=incarnation))
        elif kind == "fence":
            batch.append({"type": r.FENCE_BROKER if args[1] else r.UNFENCE_BROKER,
                          "node_id": args[0]})
        elif kind == "unregister":
            batch.append({"type": r.UNREGISTER_BROKER, "node_id": args[0]})
        elif kind == "topic" and args[0] not in topics:
            name, tid, count, replicas, partition_epoch = args
            topics[name] = (str(tid), count)
            batch.append({"type": r.TOPIC, "name": name, "topic_id": str(tid)})
            batch += [{"type": r.PARTITION, "topic_id": str(tid), "partition": p,
                       "replicas": replicas, "isr": replicas[:1], "leader": -1,
                       "leader_epoch": 0, "partition_epoch": partition_epoch}
                      for p in range(count)]
        elif kind == "change" and topics.get(args[0], ("", 0))[1] > 0:
            tid, count = topics[args[0]]
            batch.append({"type": r.PARTITION_CHANGE, "topic_id": tid,
                          "partition": args[1] % count, **args[2]})
        elif kind == "remove" and args[0] in topics:
            batch.append({"type": r.REMOVE_TOPIC, "topic_id": topics.pop(args[0])[0]})
        elif kind == "config":
            batch.append(_config(*args))
        elif kind == "producer_ids":
            batch.append({"type": r.PRODUCER_IDS, "next_producer_id": args[0]})
    return history


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(steps, min_size=10, max_size=40))
def test_any_image_survives_records_and_a_snapshot_file(ops: list[tuple[Any, ...]],
                                                        tmp_path: Path) -> None:
    image = _replayed(_history(ops))
    store = SnapshotStore(tmp_path)
    store.write(image.offset + 1, 1, image_records(image))
    loaded = replay(MetadataImage(cluster_id="c"), store.read(image.offset + 1, 1),
                    image.offset)
    assert loaded == image


# -- files -----------------------------------------------------------------------------------

def _records() -> list[dict[str, Any]]:
    return image_records(_replayed(RICH_HISTORY))


def test_an_empty_directory_has_no_snapshot(tmp_path: Path) -> None:
    assert SnapshotStore(tmp_path / "new").latest() is None


def test_write_names_the_file_and_latest_reads_back(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    records = _records()
    path = store.write(42, 3, records)
    assert path == tmp_path / "00000000000000000042-0000000003.checkpoint"
    store.write(7, 1, [])
    (tmp_path / "notes.checkpoint").write_text("not a snapshot")
    assert store.latest() == (42, 3) and store.snapshots() == [(7, 1), (42, 3)]
    assert store.read(42, 3) == records and store.read(7, 1) == []


def test_the_file_is_a_header_line_then_one_record_per_line(tmp_path: Path) -> None:
    records = _records()
    head, body = SnapshotStore(tmp_path).write(42, 3, records).read_bytes().split(b"\n", 1)
    assert json.loads(head) == {"end_offset": 42, "epoch": 3, "count": len(records),
                                "crc": crc32c.crc32c(body)}
    assert [json.loads(line) for line in body.splitlines()] == records


def test_chunks_concatenate_to_the_file_and_install_elsewhere(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "leader")
    records = _records()
    path = store.write(42, 3, records)
    size = store.size(42, 3)
    chunks = [store.read_chunk(42, 3, pos, 100) for pos in range(0, size, 100)]
    assert b"".join(chunks) == path.read_bytes() and len(chunks) > 1
    assert store.read_chunk(42, 3, size, 100) == b""
    follower = SnapshotStore(tmp_path / "follower")
    follower.install(42, 3, b"".join(chunks))
    assert follower.latest() == (42, 3) and follower.read(42, 3) == records
    assert follower.path(42, 3).read_bytes() == path.read_bytes()


def test_install_refuses_another_snapshots_bytes(tmp_path: Path) -> None:
    data = SnapshotStore(tmp_path / "leader").write(42, 3, _records()).read_bytes()
    follower = SnapshotStore(tmp_path / "follower")
    with pytest.raises(SnapshotError, match="00000000000000000043-0000000003"):
        follower.install(43, 3, data)
    assert follower.latest() is None


def _flip_a_body_byte(data: bytes) -> bytes:
    at = len(data) // 2
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def _drop_a_record_keeping_the_crc_right(data: bytes) -> bytes:
    head, body = data.split(b"\n", 1)
    body = b"".join(body.splitlines(keepends=True)[:-1])
    header = {**json.loads(head), "crc": crc32c.crc32c(body)}
    return json.dumps(header).encode() + b"\n" + body


@pytest.mark.parametrize("damage", [
    _flip_a_body_byte,
    lambda d: d[:-10],                                   # torn inside the last record
    lambda d: d[:d.rindex(b"\n", 0, -1) + 1],            # torn at a line boundary
    lambda d: d[:20],                                    # torn inside the header
    lambda d: b"",
    _drop_a_record_keeping_the_crc_right,                # count disagrees with the body
], ids=["flipped-bit", "torn-record", "torn-at-line", "torn-header", "empty", "wrong-count"])
def test_a_damaged_snapshot_is_refused(tmp_path: Path,
                                       damage: Callable[[bytes], bytes]) -> None:
    store = SnapshotStore(tmp_path / "a")
    path = store.write(42, 3, _records())
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SnapshotError, match=re.escape(str(path))):
        store.read(42, 3)
    follower = SnapshotStore(tmp_path / "b")
    with pytest.raises(SnapshotError, match=re.escape(path.name)):
        follower.install(42, 3, path.read_bytes())
    assert follower.latest() is None


def test_a_missing_snapshot_or_a_bad_range_is_a_snapshot_error(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for call in (lambda: store.read(1, 1), lambda: store.size(1, 1),
                 lambda: store.read_chunk(1, 1, 0, 10)):
        with pytest.raises(SnapshotError, match="no snapshot"):
            call()
    store.write(1, 1, _records())
    with pytest.raises(SnapshotError):
        store.read_chunk(1, 1, -1, 10)
    with pytest.raises(SnapshotError):
        store.read_chunk(1, 1, 0, -1)


def test_leftover_tmp_files_go_at_start(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    store.write(10, 1, [])
    (tmp_path / "00000000000000000020-0000000002.checkpoint.tmp").write_bytes(b"half")
    SnapshotStore(tmp_path)
    assert sorted(f.name for f in tmp_path.iterdir()) == [store.path(10, 1).name]


def test_delete_older_than_keeps_that_snapshot_and_newer(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for end, epoch in [(10, 1), (20, 2), (20, 3), (30, 3)]:
        store.write(end, epoch, [])
    store.delete_older_than(20)
    assert store.snapshots() == [(20, 2), (20, 3), (30, 3)]
    store.delete_older_than(31)
    assert store.latest() is None
