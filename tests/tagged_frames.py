"""Hand-built flexible requests carrying tagged fields no schema knows (KIP-482).

Each builder writes the request byte by byte (not through kio), with unknown tags in the
header, at the top level and inside nested structs when `unknown` is true, and without them
otherwise, so a test can check both decode to the same request.
"""
from __future__ import annotations

import struct

from .wire import compact_array, compact_bytes, compact_string, request_header_v2, tags

# Tags no version of these requests defines; 1000 takes a two-byte varint.
UNKNOWN = {1000: b"\x01\x02\x03", 7: b""}


def _tags(unknown: bool, known: dict[int, bytes] | None = None, tag: int = 9) -> bytes:
    fields = dict(known or {})
    if unknown:
        fields.update({tag: b"\xff" * 4, **UNKNOWN})
    return tags(fields)


def _header(api_key: int, version: int, correlation_id: int, unknown: bool) -> bytes:
    return request_header_v2(api_key, version, correlation_id, UNKNOWN if unknown else None)


def api_versions_v3(correlation_id: int, unknown: bool = True) -> bytes:
    return (_header(18, 3, correlation_id, unknown) + compact_string("rillet-tests")
            + compact_string("1.0") + _tags(unknown, tag=5))


def metadata_v12(correlation_id: int, topic: str, unknown: bool = True) -> bytes:
    topic_entry = bytes(16) + compact_string(topic) + _tags(unknown)
    return (_header(3, 12, correlation_id, unknown) + compact_array([topic_entry])
            + b"\x01" + b"\x00" + _tags(unknown))  # allow auto-create, no authorized ops


def create_topics_v7(correlation_id: int, topic: str, unknown: bool = True) -> bytes:
    config = compact_string("retention.ms") + compact_string("3600000") + _tags(unknown)
    topic_entry = (compact_string(topic) + struct.pack(">ih", 2, 1) + compact_array([])
                   + compact_array([config]) + _tags(unknown))
    return (_header(19, 7, correlation_id, unknown) + compact_array([topic_entry])
            + struct.pack(">i", 10000) + b"\x00" + _tags(unknown))


def produce_v9(correlation_id: int, topic: str, records: bytes, unknown: bool = True) -> bytes:
    partition = struct.pack(">i", 0) + compact_bytes(records) + _tags(unknown)
    topic_entry = compact_string(topic) + compact_array([partition]) + _tags(unknown)
    return (_header(0, 9, correlation_id, unknown) + compact_string(None)
            + struct.pack(">hi", -1, 5000) + compact_array([topic_entry]) + _tags(unknown))


def fetch_v12(correlation_id: int, topic: str, unknown: bool = True) -> bytes:
    """Also carries the known tag 0 (cluster_id), which must survive beside the unknown."""
    partition = struct.pack(">iiqiqi", 0, -1, 0, -1, -1, 1 << 20) + _tags(unknown)
    topic_entry = compact_string(topic) + compact_array([partition]) + _tags(unknown)
    body = (struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 0, -1) + compact_array([topic_entry])
            + compact_array([]) + compact_string("")
            + _tags(unknown, known={0: compact_string("some-cluster")}))
    return _header(1, 12, correlation_id, unknown) + body


def fetch_v15_replica_state(correlation_id: int, unknown: bool = True) -> bytes:
    """Fetch v15: the known tagged struct ReplicaState (tag 1) holds an unknown tag itself."""
    replica_state = struct.pack(">iq", 3, 42) + _tags(unknown)
    body = (struct.pack(">iiibii", 0, 1, 1 << 20, 0, 0, -1) + compact_array([])
            + compact_array([]) + compact_string("")
            + _tags(unknown, known={1: replica_state}))
    return _header(1, 15, correlation_id, unknown) + body
