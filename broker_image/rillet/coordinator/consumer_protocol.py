"""The consumer protocol embedded in JoinGroup metadata: what the coordinator reads of it."""
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
