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
    """Partitions of a consumer-protocol Assignment (ConsumerProtocolAssignment, any
    version); () when it is not one. A member wrote these bytes, so every count is bounded
    by the bytes that remain: each read past the end raises, however large the count."""
    try:
        r = FieldReader(data)
        r.i16()
        out: list[tuple[str, int]] = []
        for _ in range(r.i32()):
            topic = r.string()
            if topic is None:
                return ()
            out += [(topic, r.i32()) for _ in range(r.i32())]
        return tuple(out)
    except (struct.error, UnicodeDecodeError):
        return ()
