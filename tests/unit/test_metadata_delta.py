"""The metadata delta: what one committed step changed, and what changed for one node."""
from __future__ import annotations

import uuid
from typing import Any

from rillet.metadata import records as r
from rillet.metadata.delta import MetadataDelta, apply_batches, between, from_empty
from rillet.metadata.image import (BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage,
                                   replay)
from rillet.defs.acl import AclBinding

NODE = 1


def _topic(name: str, replicas: list[list[int]], tid: uuid.UUID | None = None) -> list[dict]:
    tid = tid or uuid.uuid4()
    return [{"type": r.TOPIC, "name": name, "topic_id": str(tid)}] + [
        {"type": r.PARTITION, "topic_id": str(tid), "partition": p, "replicas": reps,
         "isr": reps, "leader": reps[0], "leader_epoch": 0} for p, reps in enumerate(replicas)]


def _broker(node: int, **kw: Any) -> dict:
    return {"type": r.REGISTER_BROKER, "node_id": node, "host": "h", "port": 9090 + node, **kw}


def _base() -> MetadataImage:
    records = [_broker(1), _broker(2), _broker(3)]
    records += _topic("a", [[1, 2], [2, 1], [2, 3]]) + _topic("b", [[3, 1]])
    records.append({"type": r.CONFIG, "resource_type": TOPIC_RESOURCE, "name": "a",
                    "key": "retention.ms", "value": "100"})
    return replay(MetadataImage(cluster_id="c"), records, 0)


def _step(image: MetadataImage, records: list[dict]) -> tuple[MetadataDelta, MetadataImage]:
    return apply_batches(image, [(image.offset + 1, records)], NODE)


def _change(image: MetadataImage, topic: str, partition: int, **fields: Any) -> dict:
    return {"type": r.PARTITION_CHANGE, "topic_id": str(image.topics[topic].topic_id),
            "partition": partition, **fields}


def test_topic_creation_lists_the_topic_its_partitions_and_this_nodes_roles() -> None:
    old = _base()
    delta, new = _step(old, _topic("c", [[1, 2], [2, 1], [3, 2]]))
    assert set(delta.created_topics) == {"c"} and delta.created_topics["c"] is new.topics["c"]
    assert not delta.deleted_topics and not delta.changed_topics
    assert set(delta.partitions) == {("c", 0), ("c", 1), ("c", 2)}
    assert all(c.old is None for c in delta.partitions.values())
    assert set(delta.local.leaders) == {("c", 0)} and delta.local.became_leader == {("c", 0)}
    assert set(delta.local.followers) == {("c", 1)}
    assert delta.local.became_follower == {("c", 1)}
    assert delta.old is old and not delta.configs and not delta.brokers


def test_partition_change_of_leader_isr_and_replicas() -> None:
    old = _base()
    delta, new = _step(old, [_change(old, "a", 1, leader=1, leader_epoch=1),
                             _change(old, "a", 2, isr=[2]),
                             _change(old, "b", 0, replicas=[3, 2], isr=[3, 2])])
    assert set(delta.changed_topics) == {"a", "b"} and not delta.created_topics
    assert set(delta.partitions) == {("a", 1), ("a", 2), ("b", 0)}
    c = delta.partitions[("a", 1)]
    assert (c.old, c.new) == (old.partition("a", 1), new.partition("a", 1))
    assert delta.partitions[("a", 2)].new.isr == (2,)
    # Untouched partitions of a touched topic are not in the delta.
    assert ("a", 0) not in delta.partitions
    local = delta.local
    assert local.became_leader == {("a", 1)} and set(local.leaders) == {("a", 1)}
    assert local.moved_away == {("b", 0)} and not local.followers and not local.deleted


def test_losing_the_leadership_makes_this_node_a_follower() -> None:
    old = _base()
    delta, _ = _step(old, [_change(old, "a", 0, leader=2, leader_epoch=1)])
    assert delta.local.became_follower == {("a", 0)} and set(delta.local.followers) == {("a", 0)}
    # A follower whose leader moves between two others is changed, not "became".
    delta, _ = _step(old, [_change(old, "b", 0, leader=1, leader_epoch=1),
                           _change(old, "a", 2, leader=3, leader_epoch=1)])
    assert delta.local.became_leader == {("b", 0)} and not delta.local.followers


def test_deletion_and_recreation_under_the_same_name() -> None:
    old = _base()
    remove_b = {"type": r.REMOVE_TOPIC, "topic_id": str(old.topics["b"].topic_id)}
    delta, new = _step(old, [remove_b])
    assert delta.deleted_topics == {"b": old.topics["b"]} and "b" not in new.topics
    assert delta.local.deleted == {("b", 0)} and not delta.partitions
    remove_a = {"type": r.REMOVE_TOPIC, "topic_id": str(old.topics["a"].topic_id)}
    delta, new = _step(old, [remove_a] + _topic("a", [[2, 3]]))
    assert delta.deleted_topics["a"] is old.topics["a"]
    assert delta.created_topics["a"] is new.topics["a"]
    assert delta.local.deleted == {("a", 0), ("a", 1)}
    assert delta.partitions[("a", 0)].old is None
    # The removed topic's configs went with it.
    assert delta.configs == {(TOPIC_RESOURCE, "a"): {}}


def test_config_acl_and_broker_changes() -> None:
    old = _base()
    acl = AclBinding("TOPIC", "a", "LITERAL", "User:x", "*", "READ", "ALLOW")
    delta, new = _step(old, [
        {"type": r.CONFIG, "resource_type": BROKER_RESOURCE, "name": "1",
         "key": "log.retention.ms", "value": "5"},
        {"type": r.CONFIG, "resource_type": TOPIC_RESOURCE, "name": "a",
         "key": "retention.ms", "value": "100"},    # the same value: no change
        r.acl_record(acl),
        {"type": r.FENCE_BROKER, "node_id": 2},
        {"type": r.UNREGISTER_BROKER, "node_id": 3},
        _broker(4, fenced=True)])
    assert delta.configs == {(BROKER_RESOURCE, "1"): {"log.retention.ms": "5"}}
    assert not delta.topic_config_changed("a")
    assert delta.acls_added == {acl} and not delta.acls_removed
    assert set(delta.brokers) == {2, 3, 4}
    assert delta.fenced == {2, 4} and delta.unregistered == {3} and delta.registered == {4}
    assert not delta.partitions and not delta.created_topics
    delta, _ = _step(new, [r.acl_record(acl, remove=True), {"type": r.UNFENCE_BROKER,
                                                           "node_id": 2}])
    assert delta.acls_removed == {acl} and delta.unfenced == {2}
    assert not delta.configs


def test_an_unrelated_step_is_empty_for_topics() -> None:
    old = _base()
    delta, new = _step(old, [{"type": r.PRODUCER_IDS, "next_producer_id": 1000}])
    assert delta.is_empty and new.next_producer_id == 1000


def test_snapshot_load_is_the_delta_from_the_empty_image() -> None:
    image = _base()
    delta = from_empty(image, NODE)
    assert set(delta.created_topics) == {"a", "b"} and not delta.deleted_topics
    assert len(delta.partitions) == 4
    assert set(delta.local.leaders) == {("a", 0)}
    assert set(delta.local.followers) == {("a", 1), ("b", 0)}
    assert delta.configs == {(TOPIC_RESOURCE, "a"): {"retention.ms": "100"}}
    assert delta.registered == {1, 2, 3}


def test_between_two_images_matches_the_delta_of_the_records() -> None:
    old = _base()
    records = [_change(old, "a", 1, leader=1, leader_epoch=1),
               {"type": r.REMOVE_TOPIC, "topic_id": str(old.topics["b"].topic_id)},
               *_topic("c", [[1]]), {"type": r.FENCE_BROKER, "node_id": 3}]
    delta, new = _step(old, records)
    full = between(old, new, NODE)
    for name in ("created_topics", "deleted_topics", "changed_topics", "partitions",
                 "configs", "brokers", "local"):
        assert getattr(full, name) == getattr(delta, name), name
    # A snapshot rebuilt from records shares nothing with the old image, yet compares equal.
    assert between(old, replay(old, [], old.offset), NODE).is_empty
