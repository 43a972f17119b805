"""min.insync.replicas: acks=all is refused, and nothing is stored, when the ISR is too small.

On one node the ISR of every partition is that node, so a topic asking for two in-sync
replicas cannot take acks=all writes; acks=1 writes still go through (as in Kafka).
"""
from __future__ import annotations

import uuid

from rillet.records import Record, encode_batch
from tests.harness import BrokerProcess

from ..wire import Wire
from .clients import create_topic

NOT_ENOUGH_REPLICAS = 19


def _produce(w: Wire, topic: str, acks: int):
    batch = encode_batch([Record(offset=0, timestamp=1_700_000_000_000, key=b"k", value=b"v",
                                 headers=[])])
    resp = w.request(0, 9, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def _end_offset(w: Wire, topic: str) -> int:
    resp = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return resp.topics[0].partitions[0].offset


def test_acks_all_needs_min_insync_replicas(broker: BrokerProcess) -> None:
    strict = f"isr2-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, strict, partitions=1, config={"min.insync.replicas": "2"})
    with Wire(broker.bootstrap) as w:
        refused = _produce(w, strict, acks=-1)
        assert refused.error_code == NOT_ENOUGH_REPLICAS
        assert "min.insync.replicas is 2" in (refused.error_message or "")
        assert _end_offset(w, strict) == 0, "a refused write must not be stored"
        assert _produce(w, strict, acks=1).error_code == 0
        assert _end_offset(w, strict) == 1
        # The broker default (1) applies when the topic does not override it.
        loose = f"isr1-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, loose, partitions=1)
        assert _produce(w, loose, acks=-1).error_code == 0
