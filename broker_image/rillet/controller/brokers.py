"""Broker decisions beside registration: unregistering a broker (pure).

An unregistered broker disappears from the image (and so from Metadata,
DescribeCluster and placement); snapshots simply no longer carry it. Only a
broker that holds no replica may go: Kafka would leave such partitions naming a
broker nobody knows, so rillet refuses and names them (the operator drains a
broker with reassignments first). A broker that is still running re-registers
on its next heartbeat, as in Kafka.
"""
from __future__ import annotations

from typing import Any

from ..metadata import records as mrec
from ..metadata.image import MetadataImage
from ..protocol import errors

# How many partitions a refusal names before it says "and N more".
NAMED_PARTITIONS = 10


def hosted_partitions(image: MetadataImage, node_id: int) -> list[str]:
    """"topic-p" of every partition naming `node_id` as a replica (or one being added)."""
    return [f"{topic.name}-{p}" for topic in image.topics.values()
            for p, part in sorted(topic.partitions.items())
            if node_id in part.replicas or node_id in part.adding]


def decide_unregister(image: MetadataImage, node_id: int) -> list[dict[str, Any]]:
    if node_id not in image.brokers:
        raise errors.BrokerIdNotRegistered(f"broker {node_id} is not registered")
    hosted = hosted_partitions(image, node_id)
    if hosted:
        named = ", ".join(hosted[:NAMED_PARTITIONS])
        more = f" and {len(hosted) - NAMED_PARTITIONS} more" if len(hosted) > NAMED_PARTITIONS \
            else ""
        raise errors.InvalidRequest(
            f"broker {node_id} still holds replicas of {len(hosted)} partition(s): "
            f"{named}{more}; move them away (kafka-reassign-partitions) first")
    return [{"type": mrec.UNREGISTER_BROKER, "node_id": node_id,
             "epoch": image.brokers[node_id].epoch}]
