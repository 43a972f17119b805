"""The consumer protocol embedded in group payloads (ConsumerProtocolSubscription in
JoinGroup metadata, ConsumerProtocolAssignment in SyncGroup assignments): the parts
rillet reads. Pure; shared by the group coordinator (the subscribed topics) and the
admin client (who holds which partitions).
"""
from __future__ import annotations

import struct

from .fields import FieldReader


def parse_subscription_topics(data: bytes) -> set[str] | None:
    """Topics of a consumer-protocol Subscription (any version), None if unparsable."""
    try:
        r = FieldReader(data)
        r.i16()
        return {r.string() or "" for _ in range(r.i32())}
    except (struct.error, UnicodeDecodeError):
        return None


def parse_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """Partitions of a consumer-protocol Assignment (ConsumerProtocolAssignment, any version)."""
    if len(data) < 6:
        return ()
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(max(topics, 0)):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + n].decode("utf-8")
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            (p,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out.append((topic, p))
    return tuple(out)
