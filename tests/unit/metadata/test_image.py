"""Replaying metadata records into images: contents, and sharing of what a change leaves alone."""
from __future__ import annotations

import uuid

import pytest

from rillet.metadata import records as r
from rillet.metadata.image import TOPIC_RESOURCE, MetadataImage, build_batches, replay


def _topic(name: str, partitions: int, tid: uuid.UUID | None = None) -> list[dict]:
    tid = tid or uuid.uuid4()
    return [{"type": r.TOPIC, "name": name, "topic_id": str(tid)}] + [
        {"type": r.PARTITION, "topic_id": str(tid), "partition": p, "replicas": [1],
         "isr": [1], "leader": 1, "leader_epoch": 0} for p in range(partitions)]


def _config(name: str, key: str, value: str | None) -> dict:
    return {"type": r.CONFIG, "resource_type": TOPIC_RESOURCE, "name": name, "key": key,
            "value": value}


def _base() -> MetadataImage:
    records = [{"type": r.REGISTER_BROKER, "node_id": 1, "host": "127.0.0.1", "port": 9092}]
    records += _topic("a", 2) + _topic("b", 3) + [_config("a", "retention.ms", "100")]
    return replay(MetadataImage(cluster_id="c"), records, 0)


def test_replay_builds_topics_partitions_configs_and_ids() -> None:
    image = _base()
    assert sorted(image.topics) == ["a", "b"] and image.offset == 0
    assert len(image.topics["b"].partitions) == 3
    assert image.partition("a", 1).leader == 1
    assert image.topic_config("a") == {"retention.ms": "100"} and image.topic_config("b") == {}
    assert {n: image.topics[n].topic_id for n in "ab"} == {
        n: t for t, n in image.topic_names.items()}
    assert image.brokers[1].port == 9092


def test_a_change_shares_every_topic_and_config_it_does_not_touch() -> None:
    old = _base()
    tid = str(old.topics["b"].topic_id)
    new = replay(old, [{"type": r.PARTITION_CHANGE, "topic_id": tid, "partition": 2,
                        "leader": -1, "isr": []}], 1)
    assert new.topics["a"] is old.topics["a"]
    assert new.configs[(TOPIC_RESOURCE, "a")] is old.configs[(TOPIC_RESOURCE, "a")]
    assert new.brokers is old.brokers and new.topic_names is old.topic_names
    changed = new.partition("b", 2)
    assert (changed.leader, changed.isr, changed.partition_epoch) == (-1, (), 1)
    assert new.partition("b", 1) is old.partition("b", 1)
    # the old image is a snapshot: nothing in it moved
    assert old.partition("b", 2).leader == 1 and old.offset == 0


def test_remove_and_recreate_in_one_batch_gets_a_fresh_topic_without_old_configs() -> None:
    old = _base()
    new_id = uuid.uuid4()
    new = replay(old, [{"type": r.REMOVE_TOPIC, "topic_id": str(old.topics["a"].topic_id)}]
                 + _topic("a", 1, new_id), 1)
    assert new.topics["a"].topic_id == new_id and list(new.topics["a"].partitions) == [0]
    assert new.topic_config("a") == {}
    assert new.topic_names[new_id] == "a" and old.topics["a"].topic_id not in new.topic_names
    assert new.topics["b"] is old.topics["b"]


def test_remove_topic_drops_it_and_its_configs_and_unknown_ids_are_refused() -> None:
    old = _base()
    gone = old.topics["a"].topic_id
    new = replay(old, [{"type": r.REMOVE_TOPIC, "topic_id": str(gone)}], 1)
    assert list(new.topics) == ["b"] and (TOPIC_RESOURCE, "a") not in new.configs
    assert gone not in new.topic_names
    with pytest.raises(KeyError):
        replay(new, [{"type": r.REMOVE_TOPIC, "topic_id": str(gone)}], 2)


def test_config_set_and_unset() -> None:
    old = _base()
    new = replay(old, [_config("b", "segment.bytes", "1000"), _config("a", "retention.ms", None)],
                 1)
    assert new.topic_config("b") == {"segment.bytes": "1000"}
    assert new.topic_config("a") == {}
    assert old.topic_config("a") == {"retention.ms": "100"}


def test_topic_created_and_removed_in_one_batch_leaves_nothing() -> None:
    old = _base()
    tid = uuid.uuid4()
    new = replay(old, _topic("c", 2, tid) + [_config("c", "retention.ms", "5"),
                                             {"type": r.REMOVE_TOPIC, "topic_id": str(tid)}], 1)
    assert sorted(new.topics) == ["a", "b"] and new.topic_config("c") == {}
    assert tid not in new.topic_names


def test_startup_replay_in_one_delta_equals_replaying_batch_by_batch() -> None:
    a1, a2, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    batches = [
        (0, [{"type": r.REGISTER_BROKER, "node_id": 1, "host": "h", "port": 1}]),
        (1, _topic("a", 2, a1) + [_config("a", "retention.ms", "1")]),
        (2, _topic("b", 1, b)),
        (3, [{"type": r.PARTITION_CHANGE, "topic_id": str(a1), "partition": 0, "leader": -1}]),
        (4, [{"type": r.REMOVE_TOPIC, "topic_id": str(a1)}]),
        (5, _topic("a", 3, a2) + [_config("a", "segment.bytes", "99")]),
        (6, [{"type": r.PARTITION_CHANGE, "topic_id": str(a2), "partition": 2, "isr": []},
             _config("b", "retention.ms", "7"), _config("b", "retention.ms", None),
             {"type": r.PRODUCER_IDS, "next_producer_id": 1000}]),
    ]
    one_by_one = MetadataImage(cluster_id="c")
    for offset, records in batches:
        one_by_one = replay(one_by_one, records, offset)
    at_once = build_batches(MetadataImage(cluster_id="c"), batches)[1]
    assert at_once == one_by_one
    assert at_once.offset == 6 and at_once.topics["a"].topic_id == a2
    assert at_once.topic_config("a") == {"segment.bytes": "99"} and at_once.topic_config("b") == {}
    assert at_once.partition("a", 2).partition_epoch == 1 and at_once.next_producer_id == 1000
    assert dict(at_once.topic_names) == {a2: "a", b: "b"}


def test_live_brokers_leave_out_fenced_ones_in_node_order() -> None:
    records = [{"type": r.REGISTER_BROKER, "node_id": n, "host": "127.0.0.1", "port": 9090 + n,
                "fenced": n == 2} for n in (3, 1, 2)]
    image = replay(MetadataImage(cluster_id="c"), records, 0)
    assert [b.node_id for b in image.live_brokers] == [1, 3]
    assert image.live_broker_ids == {1, 3} and set(image.brokers) == {1, 2, 3}
