"""Entries encoded once and spliced into a message are the bytes kio writes for the message
itself, at every version (legacy and flexible arrays, fields after the array, tagged fields)."""
from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest

from rillet.dispatch import _with_throttle
from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_response, response_schema
from rillet.protocol.splice import (SplicedBody, encode_entity, encode_with_entries,
                                    entry_type)

METADATA = 3


def _topic(n: int, partitions: int) -> dict:
    return {"error_code": 0, "name": f"t{n}", "topic_id": uuid.UUID(int=n + 1),
            "is_internal": n == 0, "topic_authorized_operations": 8 * n,
            "partitions": [{"error_code": 5 * (p % 2), "partition_index": p, "leader_id": p % 3,
                            "leader_epoch": p, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2],
                            "offline_replicas": [3] * (p % 2)} for p in range(partitions)]}


def _response(version: int, topics: list[dict]) -> object:
    return build(response_schema(METADATA, version), {
        "throttle_time": 7, "cluster_id": "c", "controller_id": 2,
        "brokers": [{"node_id": i, "host": "h", "port": 9000 + i, "rack": "r"} for i in (1, 2)],
        "topics": topics, "cluster_authorized_operations": 12})


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_response_with_spliced_topics_is_the_one_kio_writes(version: int, count: int) -> None:
    topics = [_topic(n, partitions=n + 1) for n in range(count)]
    whole = _response(version, topics)
    topic_cls = entry_type(type(whole), "topics")
    entries = [encode_entity(build(topic_cls, t)) for t in topics]
    spliced = SplicedBody(_response(version, []), "topics", entries)
    assert encode_response(METADATA, 42, spliced) == encode_response(METADATA, 42, whole)


@pytest.mark.parametrize("version", range(13))
def test_partitions_spliced_into_a_topic_read_back_as_written(version: int) -> None:
    """Two levels, as the Metadata handler does: partitions into a topic, topics into the
    response; the client's decoder reads back every field."""
    topic = _topic(1, partitions=4)
    response_cls = response_schema(METADATA, version)
    topic_cls = entry_type(response_cls, "topics")
    partition_cls = entry_type(topic_cls, "partitions")
    parts = [encode_entity(build(partition_cls, p)) for p in topic["partitions"]]
    entry = encode_with_entries(build(topic_cls, {**topic, "partitions": ()}), "partitions",
                                parts)
    frame = encode_response(METADATA, 9, SplicedBody(_response(version, []), "topics", [entry]))
    correlation, body = decode_response(METADATA, version, frame[4:])
    assert correlation == 9 and body == _response(version, [topic])


def test_the_entity_value_of_the_spliced_field_is_ignored() -> None:
    """The entries are what goes out, whatever the entity still holds in that field."""
    topic = _topic(2, partitions=1)
    entry = encode_entity(build(entry_type(response_schema(METADATA, 12), "topics"), topic))
    expected = encode_response(METADATA, 1, _response(12, [topic]))
    held = _response(12, [_topic(5, partitions=2)])
    for entity in (held, dataclasses.replace(held, topics=None)):
        stale = SplicedBody(entity, "topics", [entry])
        assert encode_response(METADATA, 1, stale) == expected


def test_only_an_array_of_entities_can_be_spliced() -> None:
    with pytest.raises(TypeError):
        entry_type(response_schema(METADATA, 12), "cluster_id")
    with pytest.raises(TypeError):
        entry_type(response_schema(METADATA, 12), "no_such_field")


def test_a_throttled_spliced_answer_carries_its_throttle_time() -> None:
    """dispatch raises throttle_time on the entity around the entries (a client quota)."""
    spliced = SplicedBody(_response(12, []), "topics", [])
    throttled = _with_throttle(spliced, 1.5)
    assert throttled.entity.throttle_time == datetime.timedelta(milliseconds=1500)
    _, body = decode_response(METADATA, 12, encode_response(METADATA, 1, throttled)[4:])
    assert body.throttle_time == datetime.timedelta(milliseconds=1500)
