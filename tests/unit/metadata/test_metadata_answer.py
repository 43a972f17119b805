"""What a Metadata answer says, now that each topic's entry is encoded once per topic change
and version and kept across requests (apis/metadata_topics.py): the same answer as one built
from the image for each request, at every version, after every kind of change, per listener
and per principal."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from rillet.apis import metadata_topics
from rillet.apis.metadata import metadata
from rillet.apis.metadata_topics import partition_entry
from rillet.apis.registry import OPERATIONS_UNSET, RequestContext
from rillet.metadata import records as r
from rillet.metadata.delta import between
from rillet.metadata.directories import LOST, UNASSIGNED
from rillet.metadata.image import MetadataImage, PartitionInfo, replay
from rillet.metadata.view import MetadataView
from rillet.protocol import errors
from rillet.protocol.build import build
from rillet.protocol.codec import (RequestHeader, decode_response, encode_response,
                                   request_schema, response_schema)
from rillet.security.authorizer import Authorizer
from rillet.security.session import Session

METADATA = 3
TID = {name: str(uuid.uuid5(uuid.NAMESPACE_DNS, name)) for name in ("a", "b", "__consumer_offsets")}


def _broker_record(node_id: int, fenced: bool = False) -> dict[str, Any]:
    return {"type": r.REGISTER_BROKER, "node_id": node_id, "host": "127.0.0.1",
            "port": 9000 + node_id, "fenced": fenced,
            "endpoints": [["PLAINTEXT", "127.0.0.1", 9000 + node_id],
                          ["EXTERNAL", f"node{node_id}.example", 30000 + node_id]]}


def _topic_records(name: str, partitions: int) -> list[dict[str, Any]]:
    return [{"type": r.TOPIC, "name": name, "topic_id": TID[name]}] + [
        {"type": r.PARTITION, "topic_id": TID[name], "partition": p, "replicas": [1, 2, 3],
         "isr": [1, 2, 3], "leader": 1 + p % 3, "leader_epoch": p} for p in range(partitions)]


def _acl(principal: str, topic: str, operation: str = "DESCRIBE") -> dict[str, Any]:
    return {"type": r.ACL, "resource_type": "TOPIC", "resource_name": topic,
            "pattern_type": "LITERAL", "principal": principal, "host": "*",
            "operation": operation, "permission": "ALLOW"}


class StandInBroker:
    """What the Metadata handler uses of a broker: its image, the view that owns the topic
    memo (fed a delta per change, as the controller does), an authorizer when asked for."""

    def __init__(self, records: list[dict[str, Any]], acls: bool = False) -> None:
        self.node_id = 1
        self.cluster_id = "c"
        self.config = {"auto.create.topics.enable": False}
        self.image = replay(MetadataImage(cluster_id="c"), records, 0)
        self.metadata = MetadataView(lambda: self.image)
        self.authorizer = Authorizer(self.metadata, {
            "super.users": "", "allow.everyone.if.no.acl.found": False}) if acls else None
        self.raft = None   # this node is its own controller: its view never lags

    def apply(self, *records: dict[str, Any]) -> None:
        old = self.image
        self.image = replay(old, records, old.offset + 1)
        self.metadata.on_metadata_update(between(old, self.image, self.node_id), self.image)


def _ask(broker: StandInBroker, version: int = 12, topics: list[str] | None = None,
         listener: str = "PLAINTEXT", principal: str = "User:ANONYMOUS",
         operations: bool = False) -> Any:
    """The decoded answer, as a client reads it off the wire."""
    req = build(request_schema(METADATA, version), {
        # v0 asks for all topics with an empty list, later versions with null
        "topics": (None if version else []) if topics is None else [{"name": n} for n in topics],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": operations})
    session = Session(listener_name=listener, principal=principal)
    services: Any = broker   # what the handler uses of BrokerServices, not all of it
    ctx = RequestContext(services, RequestHeader(METADATA, version, 7, "test"), "peer", 1,
                         session=session)
    frame = encode_response(METADATA, 7, asyncio.run(metadata(ctx, req)))
    return decode_response(METADATA, version, frame[4:])[1]


def _built_per_request(broker: StandInBroker, version: int) -> Any:
    """The all-topics answer as the handler built it before it kept anything: each
    partition's entry made from the image, the whole response written by kio."""
    image = broker.image
    return build(response_schema(METADATA, version), {
        "throttle_time": 0, "cluster_id": "c", "controller_id": 1,
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b, host, port in image.brokers_for("PLAINTEXT")],
        "topics": [{"error_code": 0, "name": t.name, "topic_id": t.topic_id,
                    "is_internal": t.name == "__consumer_offsets",
                    "partitions": [partition_entry(t.partitions[p], image.live_broker_ids)
                                   for p in sorted(t.partitions)]}
                   for t in image.topics.values()],
        "cluster_authorized_operations": OPERATIONS_UNSET})


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every entity the topic entries encode (partitions, error entries), in order."""
    seen: list[object] = []
    real = metadata_topics.encode_entity

    def counting(entity: object) -> bytes:
        seen.append(entity)
        return real(entity)

    monkeypatch.setattr(metadata_topics, "encode_entity", counting)
    return seen


def _cluster() -> StandInBroker:
    return StandInBroker([_broker_record(n) for n in (1, 2, 3)] + _topic_records("a", 6)
                         + _topic_records("__consumer_offsets", 3))


def test_a_fenced_leader_is_named_no_leader() -> None:
    """As Kafka answers: LEADER_NOT_AVAILABLE with leader -1, never the id of a broker left
    out of the brokers list (kafka-python 3.0.12 looks that id up, fails, and stops sending
    for good: issue 27)."""
    broker = StandInBroker([_broker_record(1), _broker_record(2, fenced=True)]
                           + _topic_records("a", 2))
    live, fenced = _ask(broker).topics[0].partitions   # led by 1 and by 2
    assert (live.error_code, live.leader_id, live.leader_epoch) == (0, 1, 0)
    assert (fenced.error_code, fenced.leader_id, fenced.leader_epoch) == (
        errors.LeaderNotAvailable.code, -1, 1)
    assert fenced.offline_replicas == (2, 3) and fenced.replica_nodes == (1, 2, 3)


@pytest.mark.parametrize("version", range(13))
def test_every_version_answers_as_when_built_per_request(version: int) -> None:
    broker = _cluster()
    broker.apply({"type": r.FENCE_BROKER, "node_id": 3})
    expected = _built_per_request(broker, version)
    assert _ask(broker, version) == expected
    assert _ask(broker, version) == expected   # answered from what the first one kept


def test_an_unchanged_image_is_answered_without_encoding(encodings: list[object]) -> None:
    broker = _cluster()
    _ask(broker)
    assert len(encodings) == 9   # every partition once
    encodings.clear()
    _ask(broker)
    broker.apply({"type": r.CONFIG, "resource_type": 2, "name": "a", "key": "retention.ms",
                  "value": "1000"})   # a new image whose topics are the same objects
    _ask(broker)
    assert encodings == []


def test_an_isr_change_re_encodes_that_partition_only(encodings: list[object]) -> None:
    broker = _cluster()
    _ask(broker)
    encodings.clear()
    broker.apply({"type": r.PARTITION_CHANGE, "topic_id": TID["a"], "partition": 4,
                  "isr": [2, 3]})
    answer = _ask(broker)
    assert [e.partition_index for e in encodings] == [4]   # type: ignore[attr-defined]
    assert answer == _built_per_request(broker, 12)
    assert answer.topics[0].partitions[4].isr_nodes == (2, 3)


def test_a_fenced_or_unfenced_broker_changes_every_leader_it_had() -> None:
    """The live brokers are part of what an entry was encoded for: the answers kept from
    before a fencing are not served after it, nor the other way round."""
    broker = _cluster()
    assert all(p.leader_id >= 0 for p in _ask(broker).topics[0].partitions)
    broker.apply({"type": r.FENCE_BROKER, "node_id": 2})
    fenced = _ask(broker)
    assert [p.leader_id for p in fenced.topics[0].partitions] == [1, -1, 3, 1, -1, 3]
    assert fenced == _built_per_request(broker, 12)
    broker.apply({"type": r.UNFENCE_BROKER, "node_id": 2})
    assert [p.leader_id for p in _ask(broker).topics[0].partitions] == [1, 2, 3, 1, 2, 3]


def test_created_and_deleted_topics_come_and_go() -> None:
    broker = _cluster()
    _ask(broker)
    broker.apply(*_topic_records("b", 2))
    assert [t.name for t in _ask(broker).topics] == ["a", "__consumer_offsets", "b"]
    broker.apply({"type": r.REMOVE_TOPIC, "topic_id": TID["a"]})
    answer = _ask(broker)
    assert [t.name for t in answer.topics] == ["__consumer_offsets", "b"]
    assert answer == _built_per_request(broker, 12)
    assert len(broker.metadata.topic_memo) == 2   # the deleted topic's entry is dropped
    assert _ask(broker, topics=["a"]).topics[0].error_code == errors.UnknownTopicOrPartition.code


def test_each_listener_gets_its_own_broker_addresses_beside_the_same_topics() -> None:
    broker = _cluster()
    internal = _ask(broker, listener="PLAINTEXT")
    external = _ask(broker, listener="EXTERNAL")
    assert [(b.host, b.port) for b in internal.brokers] == [
        ("127.0.0.1", 9001), ("127.0.0.1", 9002), ("127.0.0.1", 9003)]
    assert [(b.host, b.port) for b in external.brokers] == [
        ("node1.example", 30001), ("node2.example", 30002), ("node3.example", 30003)]
    assert internal.topics == external.topics


def test_each_principal_sees_only_the_topics_it_may_describe() -> None:
    """Kept entries are shared, the filtering is not: asked in turns, neither principal is
    ever answered the other's view."""
    broker = StandInBroker([_broker_record(n) for n in (1, 2, 3)] + _topic_records("a", 2)
                           + _topic_records("b", 2)
                           + [_acl("User:alice", "a"), _acl("User:bob", "b")], acls=True)
    for _ in range(2):
        assert [t.name for t in _ask(broker, principal="User:alice").topics] == ["a"]
        assert [t.name for t in _ask(broker, principal="User:bob").topics] == ["b"]
        assert _ask(broker, principal="User:eve").topics == ()
    named = _ask(broker, topics=["a", "b"], principal="User:alice").topics
    assert [(t.name, t.error_code) for t in named] == [
        ("a", 0), ("b", errors.TopicAuthorizationFailed.code)]
    assert named[1].partitions == () and len(named[0].partitions) == 2


def test_authorized_operations_are_answered_per_principal_and_never_kept() -> None:
    broker = StandInBroker([_broker_record(n) for n in (1, 2, 3)] + _topic_records("a", 3)
                           + [_acl("User:alice", "a"), _acl("User:bob", "a"),
                              _acl("User:bob", "a", "WRITE")], acls=True)
    describe, write = 1 << 8, 1 << 4   # Kafka's operation codes: DESCRIBE 8, WRITE 4
    plain = _ask(broker, principal="User:bob")
    alice = _ask(broker, principal="User:alice", operations=True).topics[0]
    bob = _ask(broker, principal="User:bob", operations=True).topics[0]
    assert (alice.topic_authorized_operations, bob.topic_authorized_operations) == (
        describe, describe | write)
    assert alice.partitions == bob.partitions == plain.topics[0].partitions
    again = _ask(broker, principal="User:bob").topics[0]
    assert again.topic_authorized_operations == plain.topics[0].topic_authorized_operations \
        == OPERATIONS_UNSET


def test_named_topics_unknown_or_invalid_are_answered_with_their_error() -> None:
    broker = _cluster()
    answer = _ask(broker, topics=["a", "nope", "bad/name"])
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a", 0), ("nope", errors.UnknownTopicOrPartition.code),
        ("bad/name", errors.InvalidTopicException.code)]
    assert answer.topics[0] == _ask(broker).topics[0]


def test_a_replica_on_a_failed_log_dir_is_an_offline_replica() -> None:
    part = PartitionInfo(uuid.UUID(int=5), 0, (1, 2, 3), (1, 3), 1, 4, 7,
                         directories=(UNASSIGNED, LOST, uuid.UUID(int=9)))
    entry = partition_entry(part, frozenset({1, 2}))
    assert entry["offline_replicas"] == [2, 3]
