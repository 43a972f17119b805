"""A topic's entry in a Metadata answer, encoded once per topic change and version.

What a known topic's entry says depends on the topic's object in the image, the set of live
brokers (a partition whose leader is not live is answered without one) and the response
version; never on who asks or on which listener (partitions name brokers by id; the brokers
list, which holds the listener's addresses, is made per request). So the entry's bytes are
kept in the node's TopicMemo for (version, live brokers) and spliced into every answer that
holds the topic (protocol/splice.py). When the topic changed, its partitions whose objects
did not change keep their bytes: a moved ISR costs one partition's encoding, not the
topic's. The per-principal parts stay per request: which topics a principal may see
(metadata.py filters the kept entries) and the topic authorized operations, for which the
entry is written again around its kept partitions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..metadata.image import MetadataImage, PartitionInfo, TopicInfo
from ..metadata.topic_memo import TopicMemo
from ..protocol import errors
from ..protocol.build import build
from ..protocol.splice import encode_entity, encode_with_entries, entry_type


def partition_entry(part: PartitionInfo, live: frozenset[int]) -> dict[str, Any]:
    leader_known = part.leader in live
    return {
        "error_code": 0 if leader_known else errors.LeaderNotAvailable.code,
        "partition_index": part.partition,
        # A leader that is not live (fenced, until the controller has moved its
        # leaderships) is named -1, as Kafka does: the brokers list leaves it out, and a
        # client that reads leader_id without the partition's error code would look for
        # a broker it has no address of (kafka-python 3.0.12 then stops sending for good).
        "leader_id": part.leader if leader_known else -1,
        "leader_epoch": part.leader_epoch,
        "replica_nodes": part.replicas,
        "isr_nodes": part.isr,
        # Kafka's offline replicas: on a broker that is down, or on a failed log dir.
        "offline_replicas": [r for r in part.replicas
                             if r not in live or part.on_lost_dir(r)],
    }


@dataclass(frozen=True)
class EncodedTopic:
    """One topic's entry at one version, for one set of live brokers."""
    # partition -> (the object it was encoded from, its bytes), by partition index
    partitions: Mapping[int, tuple[PartitionInfo, bytes]]
    entry: bytes   # the whole topic entry, authorized operations not asked for


def _head(topic: TopicInfo) -> dict[str, Any]:
    """The topic entry's fields but its partitions."""
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name == "__consumer_offsets", "partitions": ()}


class TopicEntries:
    """The topic entries of one Metadata answer: a response version and an image."""

    def __init__(self, memo: TopicMemo, response_cls: type, image: MetadataImage) -> None:
        self._memo = memo
        self._topic_cls = entry_type(response_cls, "topics")
        self._partition_cls = entry_type(self._topic_cls, "partitions")
        self._live = image.live_broker_ids
        self._variant = (self._topic_cls, self._live)

    def known(self, topic: TopicInfo, operations: int | None = None) -> bytes:
        """The entry of a topic of the image; with ``operations``, its authorized operations
        (asked for by the request, per principal: never kept)."""
        encoded = self._memo.get(topic, self._variant, self._encode)
        if operations is None:
            return encoded.entry
        head = build(self._topic_cls, {**_head(topic), "topic_authorized_operations": operations})
        return encode_with_entries(head, "partitions",
                                   [data for _, data in encoded.partitions.values()])

    def error(self, code: int, name: str | None, topic_id: Any) -> bytes:
        """The entry of a topic answered with an error (no partitions)."""
        return encode_entity(build(self._topic_cls, {"error_code": code, "name": name,
                                                     "topic_id": topic_id, "partitions": ()}))

    def _encode(self, topic: TopicInfo, previous: EncodedTopic | None) -> EncodedTopic:
        kept = previous.partitions if previous is not None else {}
        partitions: dict[int, tuple[PartitionInfo, bytes]] = {}
        for index in sorted(topic.partitions):
            part = topic.partitions[index]
            old = kept.get(index)
            if old is not None and old[0] is part:
                partitions[index] = old
            else:
                partitions[index] = (part, encode_entity(build(
                    self._partition_cls, partition_entry(part, self._live))))
        entry = encode_with_entries(build(self._topic_cls, _head(topic)), "partitions",
                                    [data for _, data in partitions.values()])
        return EncodedTopic(partitions, entry)
