"""The struct writer of Produce responses (protocol/produce_response.py) against kio's own:
the same bytes for every version and the shapes a produce answer takes, and kio's bytes
for the shapes it leaves to kio."""
import io

import pytest
from kio.serial import entity_writer

from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_response, response_schema
from rillet.protocol.produce_response import build_body, write_body

VERSIONS = range(3, 12)


def kio_frame(version: int, correlation_id: int, body) -> bytes:
    """The frame as kio alone writes it: size, header (v1 when flexible), body."""
    from kio.schema.response_header.v0.header import ResponseHeader as V0
    from kio.schema.response_header.v1.header import ResponseHeader as V1
    buf = io.BytesIO()
    header = V1 if type(body).__flexible__ else V0
    entity_writer(header)(buf, header(correlation_id=correlation_id))
    entity_writer(type(body))(buf, body)
    raw = buf.getvalue()
    return len(raw).to_bytes(4, "big", signed=True) + raw


def partition(index: int, **extra) -> dict:
    return {"index": index, "error_code": 0, "base_offset": 1234567890123,
            "log_append_time": -1, "log_start_offset": 17, **extra}


SHAPES = {
    "one partition": [{"name": "t", "partition_responses": [partition(0)]}],
    "eight partitions": [{"name": "orders", "partition_responses":
                          [partition(i) for i in range(8)]}],
    "several topics": [{"name": f"topic-{n}", "partition_responses": [partition(n)]}
                       for n in range(3)],
    "log append time": [{"name": "t", "partition_responses":
                         [partition(0, log_append_time=1_700_000_000_123)]}],
    "error with message": [{"name": "t", "partition_responses": [
        {"index": 3, "error_code": 47, "base_offset": -1, "log_append_time": -1,
         "log_start_offset": -1, "error_message": "epoch 4 is older than 5 \u00e9"}]}],
    "no topics": [],
    "long topic name": [{"name": "x" * 200, "partition_responses": [partition(0)]}],
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("throttle_ms", [0, 2500])
def test_the_struct_writer_writes_kios_bytes(version, shape, throttle_ms):
    body = build(response_schema(0, version),
                 {"responses": SHAPES[shape], "throttle_time": throttle_ms})
    out = bytearray()
    assert write_body(out, body) is True
    frame = encode_response(0, 991, body)
    assert frame == kio_frame(version, 991, body)
    correlation_id, back = decode_response(0, version, frame[4:])
    assert (correlation_id, back) == (991, body)


LEFT_TO_KIO = {
    "record errors": (range(8, 12), [{"name": "t", "partition_responses": [partition(
        0, error_code=87, record_errors=[{"batch_index": 2,
                                          "batch_index_error_message": "no key"}])]}], {}),
    "current leader": (range(10, 12), [{"name": "t", "partition_responses": [partition(
        0, error_code=6, current_leader={"leader_id": 2, "leader_epoch": 9})]}], {}),
    "node endpoints": (range(10, 12), [{"name": "t", "partition_responses": [partition(0)]}],
                       {"node_endpoints": [{"node_id": 2, "host": "b2", "port": 9092}]}),
}


@pytest.mark.parametrize("shape", sorted(LEFT_TO_KIO))
def test_shapes_the_struct_writer_leaves_are_written_by_kio(shape):
    versions, responses, extra = LEFT_TO_KIO[shape]
    for v in versions:
        body = build(response_schema(0, v), {"responses": responses, **extra})
        assert write_body(bytearray(), body) is False
        frame = encode_response(0, 5, body)
        assert frame == kio_frame(v, 5, body)
        assert decode_response(0, v, frame[4:]) == (5, body)


def test_a_legacy_message_over_int16_is_refused_as_kio_refuses_it():
    """Non-flexible strings carry an int16 length: kio raises, and so does the frame."""
    body = build(response_schema(0, 8), {"responses": [{"name": "t", "partition_responses": [
        partition(0, error_code=2, error_message="m" * 40000)]}]})
    assert write_body(bytearray(), body) is False
    with pytest.raises(Exception) as by_kio:
        kio_frame(8, 5, body)
    with pytest.raises(type(by_kio.value)):
        encode_response(0, 5, body)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_build_body_builds_what_build_does(version, shape):
    schema = response_schema(0, version)
    responses = SHAPES[shape]
    assert build_body(schema, responses, 7) == \
        build(schema, {"responses": responses, "throttle_time": 7})


@pytest.mark.parametrize("odd", [
    {"current_leader": {"leader_id": 2, "leader_epoch": 9}},   # a key it does not fill
    {"record_errors": [{"batch_index": 1}]},
    {"error_code": 6.0},                                        # not a plain int
])
def test_build_body_leaves_other_dicts_to_build(odd):
    responses = [{"name": "t", "partition_responses": [partition(0, **odd)]}]
    for version in VERSIONS:
        schema = response_schema(0, version)
        assert build_body(schema, responses, 0) == \
            build(schema, {"responses": responses, "throttle_time": 0})


def test_a_partition_without_required_keys_is_left_to_build():
    responses = [{"name": "t", "partition_responses": [{"index": 1, "error_code": 0}]}]
    schema = response_schema(0, 11)
    assert build_body(schema, responses, 0).responses[0].partition_responses[0].base_offset \
        == 0 == build(schema, {"responses": responses}).responses[0] \
        .partition_responses[0].base_offset
