"""__consumer_offsets record layouts and the group -> partition mapping."""
from __future__ import annotations

from rillet.protocol.consumer_protocol import parse_assignment, parse_subscription_topics
from rillet.coordinator.group_snapshot import GroupSnapshot, LoadedMember
from rillet.coordinator.group_types import OffsetAndMetadata
from rillet.coordinator.records import (GroupKey, OffsetKey, decode_group_value, decode_key,
                                        decode_offset_value, group_key, group_partition,
                                        group_value, offset_key, offset_value)


def test_group_partition_uses_java_string_hash() -> None:
    # Java: "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert group_partition("hello", 50) == 99162322 % 50
    assert group_partition("polygenelubricants", 50) == 0
    assert all(0 <= group_partition(f"g{i}", 7) < 7 for i in range(100))


def test_offset_key_and_value_round_trip() -> None:
    assert decode_key(offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert decode_key(group_key("g")) == GroupKey("g")
    o = OffsetAndMetadata(42, 5, "meta", 1000)
    assert decode_offset_value(offset_value(o)) == o
    expiring = OffsetAndMetadata(7, -1, "", 1000, 2000)
    assert decode_offset_value(offset_value(expiring)) == expiring


def test_group_value_round_trip() -> None:
    s = GroupSnapshot("consumer", 4, "range", "m1", 1234, [
        LoadedMember("m1", "i1", "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        LoadedMember("m2", None, "c2", "/127.0.0.2", 30000, 10000, b"", b"")])
    assert decode_group_value(group_value(s)) == s


def test_subscription_topics() -> None:
    sub = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bb" + b"\xff\xff\xff\xff"
    assert parse_subscription_topics(sub) == {"a", "bb"}
    assert parse_subscription_topics(b"\x00") is None


def test_assignment_partitions_and_lying_counts() -> None:
    good = (b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01a" + b"\x00\x00\x00\x02"
            + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x03" + b"\xff\xff\xff\xff")
    assert parse_assignment(good) == (("a", 0), ("a", 3))
    assert parse_assignment(b"") == ()
    # A member's bytes: 2**31-1 topics, then a name of length 0 and one of length -6 (which
    # walked the old parser backwards for about 2**31 rounds), and bad UTF-8.
    lying = b"\x00\x00" + b"\x7f\xff\xff\xff" + b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xfa"
    assert parse_assignment(lying) == ()
    assert parse_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\x00\x00\x00\x00") == ()
    assert parse_assignment(b"\x00\x00\x7f\xff\xff\xff" + b"\x00\x01a\x7f\xff\xff\xff") == ()
