"""Records of the metadata log (`__cluster_metadata`).

Each record is a small JSON object with a "type"; a controller decision is
one batch of records, appended atomically. The image is whatever replaying
these records produces, so restart and (later) followers use the same code.
"""
from __future__ import annotations

import json
from base64 import b64encode
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
# SCRAM credentials (salt, iterations, StoredKey, ServerKey; base64) by user and mechanism.
SCRAM_CREDENTIAL = "scram_credential"
REMOVE_SCRAM_CREDENTIAL = "remove_scram_credential"
# ACL bindings, identified by their content (security/acl.AclBinding's fields).
ACL = "acl"
REMOVE_ACL = "remove_acl"
# One client quota value (KIP-546's ClientQuotaRecord): entity [[type, name or null], ...]
# sorted by type, key, value (null: removed).
CLIENT_QUOTA = "client_quota"

RECORD_TYPES = {REGISTER_BROKER, TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC, CONFIG,
                PRODUCER_IDS, LEADER_CHANGE, FENCE_BROKER, UNFENCE_BROKER,
                UNREGISTER_BROKER, SCRAM_CREDENTIAL, REMOVE_SCRAM_CREDENTIAL, ACL,
                REMOVE_ACL, CLIENT_QUOTA}
ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host",
              "operation", "permission")


def scram_record(user: str, mechanism: str, cred: Any) -> dict[str, Any]:
    """The record of one SCRAM credential (a security.scram_credential.ScramCredential)."""
    return {"type": SCRAM_CREDENTIAL, "user": user, "mechanism": mechanism,
            "salt": b64encode(cred.salt).decode(), "stored_key": b64encode(cred.stored_key)
            .decode(), "server_key": b64encode(cred.server_key).decode(),
            "iterations": cred.iterations}


def acl_record(binding: Any, remove: bool = False) -> dict[str, Any]:
    """The record adding (or removing) one security.acl.AclBinding."""
    return {"type": REMOVE_ACL if remove else ACL,
            **{f: getattr(binding, f) for f in ACL_FIELDS}}


def client_quota_record(entity: Any, key: str, value: float | None) -> dict[str, Any]:
    """The record setting (value None: removing) one quota of an entity (quotas.entity)."""
    return {"type": CLIENT_QUOTA, "entity": [list(c) for c in entity], "key": key,
            "value": value}


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
