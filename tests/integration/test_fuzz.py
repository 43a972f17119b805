"""Protocol fuzz: random and mutated frames never take the broker down."""
from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet.protocol.build import build
from rillet.protocol.codec import encode_request, request_schema
from tests.harness import BrokerProcess

from ..wire import Wire


def _valid_frames() -> list[bytes]:
    bodies = [
        (18, 3, {"client_software_name": "f", "client_software_version": "1"}),
        (3, 12, {"topics": [{"name": "fuzz-topic", "topic_id": None}],
                 "allow_auto_topic_creation": True,
                 "include_topic_authorized_operations": False}),
        (0, 9, {"acks": 1, "timeout": 1000, "topic_data": [
            {"name": "fuzz-topic", "partition_data": [{"index": 0, "records": b"\0" * 70}]}]}),
        (1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1000,
                 "topics": [{"topic": "fuzz-topic", "partitions": [
                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}],
                 "forgotten_topics_data": []}),
        (19, 7, {"topics": [{"name": "fz", "num_partitions": 1, "replication_factor": 1,
                             "assignments": [], "configs": []}], "timeout": 1000,
                 "validate_only": True}),
    ]
    out = []
    for key, version, body in bodies:
        out.append(encode_request(key, version, 1, "fuzz",
                                  build(request_schema(key, version), body))[4:])
    return out


VALID = _valid_frames()


def _still_healthy(b: BrokerProcess) -> None:
    assert b.alive(), b.log()
    with Wire(b.bootstrap) as w:
        resp = w.request(18, 3, {"client_software_name": "probe",
                                 "client_software_version": "1"})
        assert resp.error_code == 0


def _send(b: BrokerProcess, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", b.port), timeout=2) as s:
        try:
            s.sendall(payload)
            s.settimeout(0.1)  # a frame the broker waits to complete gets no answer
            s.recv(65536)
        except OSError:
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=300))
def test_random_bytes(fuzz_broker: BrokerProcess, data: bytes) -> None:
    _send(fuzz_broker, data)
    _send(fuzz_broker, struct.pack(">i", len(data)) + data)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, len(VALID) - 1), data=st.data())
def test_mutated_valid_frames(fuzz_broker: BrokerProcess, which: int, data) -> None:
    frame = bytearray(VALID[which])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    body = bytes(frame[:cut]) if data.draw(st.booleans()) else bytes(frame)
    _send(fuzz_broker, struct.pack(">i", len(body)) + body)


def test_hostile_sizes_close_only_that_connection(fuzz_broker: BrokerProcess) -> None:
    for size in (-1, 0, 3, 2**31 - 1, 200 * 1024 * 1024):
        with Wire(fuzz_broker.bootstrap) as w:
            w.send_raw(struct.pack(">i", size) + b"\0" * 16)
            assert w.is_closed(), f"size {size} did not close the connection"
    _still_healthy(fuzz_broker)


def test_broker_survives_all_fuzzing(fuzz_broker: BrokerProcess) -> None:
    _still_healthy(fuzz_broker)
