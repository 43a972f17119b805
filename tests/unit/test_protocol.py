"""Codec, response building and the API registry: bytes in, bytes out, no sockets."""
import asyncio
import struct
from types import SimpleNamespace

import pytest
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

from rillet.apis import load_all
from rillet.dispatch import dispatch
from rillet.protocol.build import build
from rillet.protocol.codec import (FramingError, decode_request, decode_response,
                                   encode_request, encode_response, request_schema,
                                   response_schema)
from tests import tagged_frames
from tests.samples import sample
from tests.wire import tags, uvarint

REGISTRY = load_all()
# A broker with none of its optional parts: ApiVersions and Produce v0-2 use nothing else.
NO_BROKER = SimpleNamespace(metrics=None, forwarder=None)


def test_every_registered_version_has_kio_schemas_and_a_handler():
    assert {0, 1, 2, 3, 18, 19, 20, 22, 23, 32, 33, 37, 44, 60} <= set(REGISTRY)
    for spec in REGISTRY.values():
        assert callable(spec.handler)
        for v in range(spec.decodable_from, spec.max_version + 1):
            assert request_schema(spec.key, v) and response_schema(spec.key, v)


def test_a_plain_function_is_refused_as_a_handler_at_registration():
    """Regression: a helper put between @api and its handler became DescribeConfigs'
    handler, and every DescribeConfigs closed its connection."""
    import pytest

    from rillet.apis.registry import api

    def config_resource(res):
        return "TOPIC", res

    with pytest.raises(TypeError, match="config_resource is not an async handler"):
        api(key=9999, versions=(0, 0))(config_resource)


def test_build_fills_defaults_and_drops_unknown_fields():
    cls = response_schema(3, 1)
    body = build(cls, {"brokers": [{"node_id": 1, "host": "h", "port": 1, "rack": None}],
                       "topics": [], "cluster_id": "dropped-in-v1", "throttle_time": 5})
    assert body.brokers[0].host == "h" and body.controller_id == -1


def _api_versions_frame(version: int) -> bytes:
    body = build(request_schema(18, min(version, 3)),
                 {"client_software_name": "t", "client_software_version": "1"})
    frame = encode_request(18, min(version, 3), 7, "c", body)[4:]
    return frame[:2] + struct.pack(">h", version) + frame[4:]


def test_api_versions_answers_from_the_registry():
    """Clients see the broker APIs; the controller listener adds the quorum RPCs."""
    for listener in ("broker", "controller"):
        out = asyncio.run(dispatch(NO_BROKER, _api_versions_frame(3), "test", 1, listener))
        corr, resp = decode_response(18, 3, out[4:])
        assert corr == 7 and resp.error_code == 0
        advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert advertised == {s.key: (s.min_version, s.max_version) for s in REGISTRY.values()
                              if listener == "controller" or s.scope == "broker"}
    assert 52 in advertised and 3 in advertised


def test_quorum_rpcs_are_refused_on_the_client_listener():
    vote = build(request_schema(52, 0), {"cluster_id": "c", "topics": []})
    frame = encode_request(52, 0, 1, "c", vote)[4:]
    with pytest.raises(FramingError, match="controller listener only"):
        asyncio.run(dispatch(NO_BROKER, frame, "test", 1, "broker"))


def test_api_versions_unknown_version_gets_v0_error_with_ranges():
    out = asyncio.run(dispatch(NO_BROKER, _api_versions_frame(9), "test", 1))
    corr, resp = decode_response(18, 0, out[4:])
    broker_apis = [s for s in REGISTRY.values() if s.scope == "broker"]
    assert corr == 7 and resp.error_code == 35 and len(resp.api_keys) == len(broker_apis)


@pytest.mark.parametrize("frame", [b"", b"\x00\x01", b"\x7f\x7f\x00\x00\x00\x00\x00\x01",
                                   b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00"])
def test_garbage_is_a_framing_error(frame):
    with pytest.raises(FramingError):
        asyncio.run(dispatch(NO_BROKER, frame, "test", 1))


def test_truncated_request_is_a_framing_error():
    body = build(request_schema(3, 9), {"topics": [{"name": "abc"}],
                                        "allow_auto_topic_creation": True})
    frame = encode_request(3, 9, 1, "c", body)[4:]
    with pytest.raises(FramingError):
        decode_request(frame[:-3])


# --- unknown tagged fields (KIP-482) ------------------------------------------------------

def _flexible_requests() -> list[tuple[int, int]]:
    return [(spec.key, v) for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
            for v in range(spec.decodable_from, spec.max_version + 1)
            if request_schema(spec.key, v).__flexible__]


@pytest.mark.parametrize("api_key,version", _flexible_requests())
def test_unknown_tags_in_header_and_body_are_skipped_for_every_flexible_request(api_key,
                                                                                version):
    body = build(request_schema(api_key, version), sample(request_schema(api_key, version)))
    clean = encode_request(api_key, version, 5, "c", body)[4:]
    header_end = 8 + 2 + len("c")  # key, version, correlation, client_id; then the tag count
    assert clean[header_end] == 0 and clean[-1] == 0, "expected empty tag sections"
    unknown = tags({4000: b"\x00" * 3, 11: b"x"})
    tagged = clean[:header_end] + unknown + clean[header_end + 1:-1] + unknown
    assert decode_request(tagged) == decode_request(clean)


@pytest.mark.parametrize("build_frame", [
    lambda unknown: tagged_frames.api_versions_v3(1, unknown),
    lambda unknown: tagged_frames.metadata_v12(1, "events", unknown),
    lambda unknown: tagged_frames.create_topics_v7(1, "events", unknown),
    lambda unknown: tagged_frames.produce_v9(1, "events", b"batch-bytes", unknown),
    lambda unknown: tagged_frames.fetch_v12(1, "events", unknown),
    lambda unknown: tagged_frames.fetch_v15_replica_state(1, unknown),
], ids=["api_versions_v3", "metadata_v12", "create_topics_v7", "produce_v9", "fetch_v12",
        "fetch_v15_replica_state"])
def test_hand_built_requests_with_nested_unknown_tags_decode_as_without(build_frame):
    header, body = decode_request(build_frame(True))
    assert (header, body) == decode_request(build_frame(False))
    assert header.client_id == "wire-test"


def test_hand_built_frames_carry_what_they_say():
    """The builders are read back field by field, so the equality above is not vacuous."""
    _, create = decode_request(tagged_frames.create_topics_v7(1, "events"))
    topic = create.topics[0]
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("events", 2, 1)
    assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "3600000")]
    _, produce = decode_request(tagged_frames.produce_v9(1, "events", b"batch-bytes"))
    assert produce.topic_data[0].partition_data[0].records == b"batch-bytes"
    _, fetch = decode_request(tagged_frames.fetch_v12(1, "events"))
    assert fetch.cluster_id == "some-cluster"  # a known tag kept beside the unknown ones
    assert fetch.topics[0].partitions[0].partition_max_bytes == 1 << 20
    _, fetch15 = decode_request(tagged_frames.fetch_v15_replica_state(1))
    assert (fetch15.replica_state.replica_id, fetch15.replica_state.replica_epoch) == (3, 42)


def test_kio_alone_refuses_unknown_tags():
    """Why the tolerant reader exists: when kio skips unknown tags itself, drop it."""
    frame = tagged_frames.api_versions_v3(1)
    with pytest.raises(KeyError, match="Unknown tagged field"):
        entity_reader(RequestHeaderV2)(frame, 0)


@pytest.mark.parametrize("cut", [1, 3, 6])
def test_truncated_frames_with_unknown_tags_are_framing_errors(cut):
    with pytest.raises(FramingError):
        decode_request(tagged_frames.produce_v9(1, "events", b"batch-bytes")[:-cut])


def test_lying_tag_counts_are_framing_errors_not_hangs():
    frame = tagged_frames.api_versions_v3(1, unknown=False)
    with pytest.raises(FramingError):
        decode_request(frame[:-1] + uvarint(2**31) + b"\x05\x00")


def test_api_versions_v3_with_unknown_tags_is_answered():
    out = asyncio.run(dispatch(NO_BROKER, tagged_frames.api_versions_v3(7), "test", 1))
    corr, resp = decode_response(18, 3, out[4:])
    broker_apis = [s for s in REGISTRY.values() if s.scope == "broker"]
    assert corr == 7 and resp.error_code == 0 and len(resp.api_keys) == len(broker_apis)


def test_unknown_tags_in_responses_are_skipped_too():
    """rillet's own client reads newer brokers' responses through the same reader."""
    body = build(response_schema(18, 3), {"error_code": 0, "api_keys": [
        {"api_key": 0, "min_version": 3, "max_version": 11}]})
    clean = encode_response(18, 9, body)[4:]
    assert clean[-1] == 0
    # 1 = finalized_features_epoch, known to v3; 77 is not
    tagged = clean[:-1] + tags({1: struct.pack(">q", 7), 77: b"new"})
    corr, resp = decode_response(18, 3, tagged)
    assert corr == 9 and resp.api_keys[0].max_version == 11
    assert resp.finalized_features_epoch == 7


def _produce_v0(body: bytes) -> bytes:
    return struct.pack(">hhih", 0, 0, 9, 1) + b"c" + body


def test_produce_v0_2_are_answered_unsupported_version_per_partition():
    frame = _produce_v0(struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 1) + b"t"
                        + struct.pack(">iii", 1, 0, 0))
    out = asyncio.run(dispatch(NO_BROKER, frame, "test", 1))
    size, corr, topics, name_len = struct.unpack_from(">iiih", out)
    assert (corr, topics, out[14:15]) == (9, 1, b"t")
    (_, index, code) = struct.unpack_from(">iih", out, 15)
    assert (index, code) == (0, 35)


@pytest.mark.parametrize("body", [
    struct.pack(">hii", 1, 1000, 2**31 - 1) + struct.pack(">h", -2) * 4,  # name -2: went back
    struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 2**30),
    struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 1) + b"t"
    + struct.pack(">iii", 1, 0, 2**31 - 1),
    struct.pack(">hii", 1, 1000, -5),
], ids=["negative-name-length", "huge-partition-count", "records-past-end", "negative-count"])
def test_produce_v0_2_with_lying_lengths_is_a_framing_error(body):
    """kio has no schema for Produce v0-2; their hand parser bounds every length too (a name
    length of -2 stepped back over itself 2^31 times, growing the answer each time)."""
    with pytest.raises(FramingError, match="malformed produce v0"):
        asyncio.run(dispatch(NO_BROKER, _produce_v0(body), "test", 1))
