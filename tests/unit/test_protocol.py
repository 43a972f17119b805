"""Codec, response building and the API registry: bytes in, bytes out, no sockets."""
import asyncio
import struct

import pytest

from rillet.apis import load_all
from rillet.dispatch import dispatch
from rillet.protocol.build import build
from rillet.protocol.codec import (FramingError, decode_request, decode_response,
                                   encode_request, request_schema, response_schema)

REGISTRY = load_all()


def test_every_registered_version_has_kio_schemas_and_a_handler():
    assert {0, 1, 2, 3, 18, 19, 20, 22, 23, 32, 33, 37, 44, 60} <= set(REGISTRY)
    for spec in REGISTRY.values():
        assert callable(spec.handler)
        for v in range(spec.decodable_from, spec.max_version + 1):
            assert request_schema(spec.key, v) and response_schema(spec.key, v)


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
        out = asyncio.run(dispatch(None, _api_versions_frame(3), "test", 1, listener))
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
        asyncio.run(dispatch(None, frame, "test", 1, "broker"))


def test_api_versions_unknown_version_gets_v0_error_with_ranges():
    out = asyncio.run(dispatch(None, _api_versions_frame(9), "test", 1))
    corr, resp = decode_response(18, 0, out[4:])
    broker_apis = [s for s in REGISTRY.values() if s.scope == "broker"]
    assert corr == 7 and resp.error_code == 35 and len(resp.api_keys) == len(broker_apis)


@pytest.mark.parametrize("frame", [b"", b"\x00\x01", b"\x7f\x7f\x00\x00\x00\x00\x00\x01",
                                   b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00"])
def test_garbage_is_a_framing_error(frame):
    with pytest.raises(FramingError):
        asyncio.run(dispatch(None, frame, "test", 1))


def test_truncated_request_is_a_framing_error():
    body = build(request_schema(3, 9), {"topics": [{"name": "abc"}],
                                        "allow_auto_topic_creation": True})
    frame = encode_request(3, 9, 1, "c", body)[4:]
    with pytest.raises(FramingError):
        decode_request(frame[:-3])
