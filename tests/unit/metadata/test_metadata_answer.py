"""What a Metadata answer says of a partition whose leader is not live."""
from __future__ import annotations

import uuid

from rillet.apis.metadata import _partitions
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.protocol import errors


def test_a_fenced_leader_is_named_no_leader() -> None:
    """As Kafka answers: LEADER_NOT_AVAILABLE with leader -1, never the id of a broker left
    out of the brokers list (kafka-python 3.0.12 looks that id up, fails, and stops sending
    for good: issue 27)."""
    tid = str(uuid.uuid4())
    image = replay(MetadataImage(cluster_id="c"), [
        {"type": r.REGISTER_BROKER, "node_id": 1, "host": "127.0.0.1", "port": 9092},
        {"type": r.REGISTER_BROKER, "node_id": 2, "host": "127.0.0.1", "port": 9093,
         "fenced": True},
        {"type": r.TOPIC, "name": "t", "topic_id": tid},
        {"type": r.PARTITION, "topic_id": tid, "partition": 0, "replicas": [1, 2],
         "isr": [1, 2], "leader": 1, "leader_epoch": 3},
        {"type": r.PARTITION, "topic_id": tid, "partition": 1, "replicas": [2, 1],
         "isr": [2, 1], "leader": 2, "leader_epoch": 5}], 0)
    assert image.live_broker_ids == {1}
    live, fenced = _partitions(image.topics["t"], image)
    assert (live["error_code"], live["leader_id"], live["leader_epoch"]) == (0, 1, 3)
    assert (fenced["error_code"], fenced["leader_id"], fenced["leader_epoch"]) == (
        errors.LeaderNotAvailable.code, -1, 5)
    assert fenced["offline_replicas"] == [2] and fenced["replica_nodes"] == (2, 1)
