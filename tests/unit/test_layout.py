"""Every length on the wire is bounded before kio's native reader allocates for it.

The frame from the issue (a Metadata v12 request whose topics count is a five-byte varint
of about 13.7 billion) made kio's native reader ask for 110 GB and abort the process. These
tests run in-process on purpose: should the guard miss a length, the native reader aborts
the test run itself, which no assertion could hide.
"""
from __future__ import annotations

import dataclasses
import io
import subprocess
import sys

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveTupleField,
                                    classify_field, is_optional)

from rillet.apis import load_all
from rillet.protocol.build import build
from rillet.protocol.codec import (FramingError, decode_request, decode_response,
                                   encode_request, request_schema, response_schema)
from rillet.protocol.layout import Malformed, layout_of, read_uvarint
from tests.samples import all_kio_schemas, sample

# The issue's frame, size prefix included: Metadata v12, client id "rdkafka", then a topics
# count of 0xfdd6a78364 (a varint running past 32 bits) and bytes to spare.
ISSUE_FRAME = bytes.fromhex(
    "0000002f0003000c00000002000772646b61666b6100fdd6a7836462ece4a6e2fbac37d664b9a6cc69a1"
    "8645ba10a301000000")

REGISTRY = load_all()


ALL_SCHEMAS = all_kio_schemas()


def _served() -> list[tuple[int, int]]:
    return [(s.key, v) for s in sorted(REGISTRY.values(), key=lambda s: s.key)
            for v in range(s.decodable_from, s.max_version + 1)]


def _encode(cls: type, data: dict) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, data))
    return buf.getvalue()


def test_the_issue_frame_is_a_framing_error():
    with pytest.raises(FramingError, match="metadata|api key 3 v12"):
        decode_request(ISSUE_FRAME[4:])


def test_kio_alone_aborts_the_process_on_the_issue_frame():
    """Why the guard exists. When a kio release bounds lengths itself, this fails: then
    prefer kio's own check and drop the walk's bounds. Under a 1 GiB address limit, as in a
    pod, so the allocation fails whatever the host's overcommit policy."""
    script = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
              "from kio.index import load_request_schema; "
              "from kio.serial import entity_reader; "
              "from kio.schema.request_header.v2.header import RequestHeader; "
              f"f = bytes.fromhex({ISSUE_FRAME[4:].hex()!r}); "
              "h, n = entity_reader(RequestHeader)(f, 0); "
              "entity_reader(load_request_schema(3, 12))(f, n)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert run.returncode == -6, (run.returncode, run.stderr[-500:])  # SIGABRT
    assert b"memory allocation of" in run.stderr


def test_kio_has_schemas_to_walk():
    assert len(ALL_SCHEMAS) > 500


@pytest.mark.parametrize("items", [0, 2])
def test_the_walk_ends_where_kio_ends_for_every_schema(items):
    """For every request and response of every API and version kio knows (rillet's own
    client reads responses too), with every tagged field present and non-empty values, the
    walk accepts the message and ends exactly where the native reader does."""
    for cls in ALL_SCHEMAS:
        raw = _encode(cls, sample(cls, tagged=True, items=items)) + b"trailing"
        _, used = entity_reader(cls)(raw, 0)
        assert layout_of(cls).check(raw, 0, len(raw)) == used, cls


def _minimal(cls: type) -> dict:
    """The smallest instance: empty arrays and strings, null nullable structs, no tags."""
    data: dict = {}
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            data[f.name] = None if is_optional(f) else _minimal(kind.type_)
        elif isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            data[f.name] = []
        else:
            data[f.name] = {"string": "", "bytes": b"", "records": b"", "bool": False,
                            "float64": 0.0, "uuid": None}.get(f.metadata["kafka_type"], 0)
    return data


def _nested(cls: type) -> set[type]:
    out = {cls}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, (EntityField, EntityTupleField)):
            out |= _nested(kind.type_)
    return out


def test_the_minimum_size_is_what_the_smallest_instance_takes():
    """An array count is refused when count x minimum size exceeds the bytes left: too big a
    minimum would refuse good messages, too small a one would let a lie through."""
    classes = set().union(*(_nested(cls) for cls in ALL_SCHEMAS))
    checked = 0
    for cls in classes:
        if any(f.name == "client_id" for f in dataclasses.fields(cls)) \
                and cls.__name__ == "RequestHeader":
            continue  # headers are never array elements
        try:
            raw = _encode(cls, _minimal(cls))
        except Exception:
            continue  # a non-nullable uuid and the like: no minimal value to build
        assert layout_of(cls).min_size == len(raw), cls
        checked += 1
    assert checked > 1000


_HUGE = [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\x7f\xff\xff\xff",
         b"\x40\x00\x00\x00", b"\xff\xff\xff\xf0"]


def _overwritten(frame: bytes):
    for pos in range(8, len(frame)):
        for pattern in _HUGE:
            yield frame[:pos] + pattern + frame[pos + len(pattern):]


def test_a_huge_value_at_any_offset_of_any_served_request_is_refused_or_read():
    """Every offset of every request version rillet serves (two elements in every array),
    overwritten with the largest compact and legacy lengths: each frame is refused with
    FramingError or read, and the process lives."""
    refused = 0
    for key, version in _served():
        cls = request_schema(key, version)
        frame = encode_request(key, version, 1, "fuzz", build(cls, sample(
            cls, tagged=True, items=2)))[4:]
        for mutated in _overwritten(frame):
            try:
                decode_request(mutated)
            except FramingError:
                refused += 1
    assert refused > 10_000


def test_a_huge_value_in_any_response_rillet_reads_is_refused_or_read():
    refused = 0
    for key, version in _served():
        cls = response_schema(key, version)
        header = b"\x00\x00\x00\x01" + (b"\x00" if cls.__flexible__ and key != 18 else b"")
        frame = header + _encode(cls, sample(cls, tagged=True, items=2))
        for mutated in _overwritten(frame[:4] + frame[4:]):
            try:
                decode_response(key, version, mutated)
            except FramingError:
                refused += 1
    assert refused > 10_000


@pytest.mark.parametrize("raw,reason", [
    (b"", "ends inside a varint"),
    (b"\x80\x80", "ends inside a varint"),
    (b"\xff\xff\xff\xff\x10", "longer than 32 bits"),
])
def test_bad_varints_are_malformed(raw, reason):
    with pytest.raises(Malformed, match=reason):
        read_uvarint(raw, 0, len(raw))


def test_the_largest_five_byte_varint_reads():
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0, 5) == (2**32 - 1, 5)


def test_a_known_tag_whose_length_lies_is_malformed():
    """The native reader ignores a known tag's length; the walk insists on it, so both
    read the same bytes."""
    cls = request_schema(1, 12)
    frame = encode_request(1, 12, 1, "c", build(cls, {
        "cluster_id": "abc", "replica_id": -1, "max_wait": 0, "min_bytes": 1,
        "max_bytes": 1, "topics": [], "forgotten_topics_data": [], "rack_id": ""}))[4:]
    assert frame.endswith(b"\x01\x00\x04\x04abc")  # one tag: 0, 4 bytes, "abc"
    decode_request(frame)
    for lie in (b"\x01\x00\x02\x04abc", b"\x01\x00\x06\x04abcXY"):
        with pytest.raises(FramingError, match="tagged field 0|runs past"):
            decode_request(frame[:-7] + lie)


@pytest.mark.parametrize("marker", [0x00, 0x02, 0x80, 0xFE])
def test_a_nullable_struct_marker_other_than_minus_one_or_one_is_malformed(marker):
    cls = load_request_schema(75, 0)  # DescribeTopicPartitions: a nullable cursor
    raw = _encode(cls, {"topics": [], "response_partition_limit": 10, "cursor": None})
    assert raw[-2] == 0xFF
    layout_of(cls).check(raw, 0, len(raw))
    with pytest.raises(Malformed, match="struct marker"):
        layout_of(cls).check(raw[:-2] + bytes([marker]) + raw[-1:], 0, len(raw))


def test_a_null_array_is_refused_where_the_schema_has_none_and_read_where_it_has():
    """The native reader hands a handler None for a null array whatever the schema says;
    Kafka's parser refuses it where the field is not nullable, and so does the walk."""
    create = encode_request(19, 7, 1, "c", build(request_schema(19, 7), {
        "topics": [], "timeout": 1000, "validate_only": False}))[4:]
    header_end = 8 + 2 + 1 + 1  # key, version, correlation, client id "c", tag count
    assert create[header_end] == 1  # topics: compact length 0 + 1
    with pytest.raises(FramingError, match="null array"):
        decode_request(create[:header_end] + b"\x00" + create[header_end + 1:])
    metadata = encode_request(3, 12, 1, "c", build(request_schema(3, 12), {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}))[4:]
    assert metadata[header_end] == 1
    _, body = decode_request(metadata[:header_end] + b"\x00" + metadata[header_end + 1:])
    assert body.topics is None  # all topics, as Kafka's Metadata v1+ means by null
