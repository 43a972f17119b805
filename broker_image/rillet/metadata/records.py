"""Records of the metadata log (`__cluster_metadata`).

Each record is a small JSON object with a "type"; a controller decision is
one batch of records, appended atomically. The image is whatever replaying
these records produces, so restart and (later) followers use the same code.
"""
from __future__ import annotations

import json
from typing import Any

REGISTER_BROKER = "register_broker"
TOPIC = "topic"
PARTITION = "partition"
PARTITION_CHANGE = "partition_change"
REMOVE_TOPIC = "remove_topic"
CONFIG = "config"
PRODUCER_IDS = "producer_ids"
# Raft's own entry at the start of every leader's epoch (KRaft's LeaderChangeMessage);
# the image ignores it.
LEADER_CHANGE = "leader_change"
FENCE_BROKER = "fence_broker"
UNFENCE_BROKER = "unfence_broker"
UNREGISTER_BROKER = "unregister_broker"

RECORD_TYPES = {REGISTER_BROKER, TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC, CONFIG,
                PRODUCER_IDS, LEADER_CHANGE, FENCE_BROKER, UNFENCE_BROKER,
                UNREGISTER_BROKER}


def encode(record: dict[str, Any]) -> tuple[bytes, bytes]:
    """(key, value) of a metadata record as stored in the log."""
    if record.get("type") not in RECORD_TYPES:
        raise ValueError(f"unknown metadata record type {record.get('type')!r}")
    return record["type"].encode(), json.dumps(record, separators=(",", ":")).encode()


def decode(value: bytes) -> dict[str, Any]:
    record = json.loads(value)
    if record.get("type") not in RECORD_TYPES:
        raise ValueError(f"unknown metadata record type {record.get('type')!r}")
    return record
