"""Protocol fuzz: random and mutated frames never take the broker down."""
from __future__ import annotations

import os
import socket
import struct
from typing import Any, Callable
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet.protocol.build import build
from rillet.protocol.codec import encode_request, request_schema
from rillet.protocol.bounds import MAX_REQUEST_ELEMENTS
from rillet.protocol.errors import (CorruptMessage, InvalidRequest, NotLeaderOrFollower,
                                    UnknownTopicOrPartition)
from rillet.records import Compression, Record, encode_batch
from tests import tagged_frames
from tests.bombs import zstd_rle_bomb
from tests.cluster import LocalCluster
from tests.fuzz import campaign
from tests.fuzz import targets as campaign_targets
from tests.harness import BrokerProcess

from ..wire import Wire, compact_array, compact_string, request_header_v2, tags


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


# --- issue 31: no frame may end the process ------------------------------------------------

# The frame that aborted every rillet process: Metadata v12 whose topics count is a varint
# of about 13.7 billion, 51 bytes with its size prefix.
ISSUE_31_FRAME = bytes.fromhex(
    "0000002f0003000c00000002000772646b61666b6100fdd6a7836462ece4a6e2fbac37d664b9a6cc69a1"
    "8645ba10a301000000")
CI_FRAMES = int(os.environ.get("RILLET_FUZZ_FRAMES", "20000"))


def _hit_and_check(host: str, port: int, node: BrokerProcess) -> None:
    """Send the frame; that connection closes with one line saying why, the process lives,
    the next client is answered normally."""
    logged = len(node.log_path.read_bytes())
    with Wire(f"{host}:{port}") as w:
        w.send_raw(ISSUE_31_FRAME)
        assert w.is_closed(), "the malformed request did not close its connection"
    assert node.alive(), node.log()
    new = node.log_path.read_bytes()[logged:].decode(errors="replace")
    assert [line for line in new.splitlines() if "closing connection" in line
            and "api key 3 v12 request: Malformed('varint longer than 32 bits')" in line], new
    with Wire(f"{host}:{port}") as w:
        versions = w.request(18, 3, {"client_software_name": "after",
                                     "client_software_version": "1"})
        assert versions.error_code == 0
        metadata = w.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        assert [b.node_id for b in metadata.brokers]


def test_the_51_byte_frame_closes_only_its_connection(fuzz_broker: BrokerProcess) -> None:
    _hit_and_check(fuzz_broker.host, fuzz_broker.port, fuzz_broker)


def _metadata_v9(names: list[bytes]) -> bytes:
    """A Metadata v9 request frame (no size prefix) naming ``names``, each as given."""
    body = compact_array([compact_string(n.decode()) + tags() for n in names])
    return request_header_v2(3, 9, 7) + body + b"\x00\x00\x00" + tags()


def test_a_request_past_the_element_budget_closes_only_its_connection(
        fuzz_broker: BrokerProcess) -> None:
    """An audit's find: 4 million empty names (8 MB, far under socket.request.max.bytes) grew
    a broker by 1.7 GB and held its event loop for minutes. Past the element budget a
    request is malformed, however few bytes it takes; refused before anything is decoded."""
    rss = campaign_targets.rss_kb(fuzz_broker)
    logged = len(fuzz_broker.log_path.read_bytes())
    frame = _metadata_v9([b""] * (MAX_REQUEST_ELEMENTS + 1))
    with Wire(fuzz_broker.bootstrap) as w:
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        assert w.is_closed(), "the oversized request did not close its connection"
    new = fuzz_broker.log_path.read_bytes()[logged:].decode(errors="replace")
    assert "array elements in one message" in new, new
    _still_healthy(fuzz_broker)
    # Nothing was decoded: resident memory grew by less than the frame's own size allows.
    assert campaign_targets.rss_kb(fuzz_broker) - rss < 64 * 1024


def test_a_topic_named_many_times_is_answered_once(fuzz_broker: BrokerProcess) -> None:
    """As Kafka's handler takes the names as a set: 100,000 copies of one name, one answer."""
    frame = _metadata_v9([b"never-created"] * 100_000)
    with Wire(fuzz_broker.bootstrap, timeout=60) as w:
        _, resp = w.request_frame(3, 9, frame)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("never-created", UnknownTopicOrPartition.code)]  # auto-creation not asked for
    _still_healthy(fuzz_broker)


def test_a_follower_fetch_of_an_old_version_is_answered(fuzz_broker: BrokerProcess) -> None:
    """Found by the campaign: Fetch v4-8 from a replica id carry no current leader epoch,
    and the follower path read it unconditionally (UNKNOWN_SERVER_ERROR)."""
    with Wire(fuzz_broker.bootstrap) as w:
        w.request(19, 5, {"topics": [{"name": "fuzz-follower", "num_partitions": 1,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": []}], "timeout": 10000,
                          "validate_only": False})
        resp = w.request(1, 4, {"replica_id": 7, "max_wait": 0, "min_bytes": 1,
                                "max_bytes": 1000, "isolation_level": 0, "topics": [
                                    {"topic": "fuzz-follower", "partitions": [
                                        {"partition": 0, "fetch_offset": 0,
                                         "partition_max_bytes": 1000}]}]})
    [part] = resp.responses[0].partitions
    assert part.error_code == NotLeaderOrFollower.code  # broker 7 is no replica


def test_metadata_v10_11_with_a_null_topic_name_is_refused(fuzz_broker: BrokerProcess) -> None:
    """Found by the campaign: a topic by id only exists from v12, and the v10-11 response
    cannot carry a null name (its encoding failed with a traceback); Kafka refuses it."""
    for version in (10, 11):
        with Wire(fuzz_broker.bootstrap) as w:
            w.request(3, version, {"topics": [{"name": None, "topic_id": None}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False},
                      expect_response=False)
            assert w.is_closed()
    assert "Metadata v11: a topic name can be null from v12" in fuzz_broker.log()


def test_campaign_on_a_single_node(fuzz_broker: BrokerProcess) -> None:
    """Mutated frames recorded from the Java client, librdkafka, kafka-python and aiokafka
    (tests/fuzz/corpus), one and several per connection; `make fuzz` runs a million."""
    report = campaign.run(campaign_targets.single_node_targets(fuzz_broker), CI_FRAMES,
                          seed=31, seconds=300)
    print(report.table("single node"))
    assert not report.failures, report.table("single node")
    assert report.frames >= CI_FRAMES and report.refused == 0


def _controller_refusals(spec: Any) -> None:
    """Quorum RPCs, FetchSnapshot and Envelopes that are not what they must be get
    INVALID_REQUEST (found by the campaign: IndexError and UnicodeDecodeError tracebacks)."""
    metadata_0 = {"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 0, "replica_epoch": 1, "replica_id": 9, "last_offset_epoch": 0,
         "last_offset": 0}]}
    two_partitions = dict(metadata_0, partitions=metadata_0["partitions"] * 2)
    with Wire(spec.controller_address) as w:
        vote = w.request(52, 0, {"cluster_id": None, "topics": [two_partitions]})
        assert vote.error_code == InvalidRequest.code
        snapshot = w.request(59, 0, {"cluster_id": None, "replica_id": 9, "max_bytes": 1000,
                                     "topics": []})
        assert snapshot.error_code == InvalidRequest.code
        inner = encode_request(18, 0, 1, "c", build(request_schema(18, 0), {}))[4:]
        envelope = w.request(58, 0, {"request_data": inner, "request_principal": b"\xff\xfe",
                                     "client_host_address": b"\x7f\x00\x00\x01"})
        assert envelope.error_code == InvalidRequest.code


def _malformed_create_topics() -> bytes:
    """CreateTopics v7 whose topics count is the issue's varint: forwarded to the active
    controller before the fix (which closed the link between the nodes), refused here now."""
    frame = encode_request(19, 7, 1, "c", build(request_schema(19, 7), {
        "topics": [], "timeout": 1000, "validate_only": False}))
    header_end = 4 + 8 + 2 + 1 + 1
    return (struct.pack(">i", len(frame) - 4 + 4) + frame[4:header_end]
            + bytes.fromhex("fdd6a78364") + frame[header_end + 1:])


def test_campaign_on_a_cluster_client_and_controller_listeners(
        cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(3, proxied=False)
    for spec in cluster.specs:
        node = cluster.node(spec.node_id)
        _hit_and_check(spec.host, spec.client_port, node)
        _hit_and_check(spec.host, spec.controller_port, node)
        _controller_refusals(spec)
    for spec in cluster.specs:  # every node refuses it itself; none relays it
        with Wire(spec.client_address) as w:
            w.send_raw(_malformed_create_topics())
            assert w.is_closed()
    logs = cluster.logs(tail=200_000)
    assert logs.count("api key 19 v7 request: Malformed") == 3, logs
    assert "could not relay" not in logs
    report = campaign.run(campaign_targets.cluster_targets(cluster), CI_FRAMES, seed=32,
                          seconds=300)
    print(report.table("3-node cluster"))
    assert not report.failures, report.table("3-node cluster")
    assert report.frames >= CI_FRAMES and report.refused == 0
    for spec in cluster.specs:  # and each still serves metadata to a client
        _hit_and_check(spec.host, spec.client_port, cluster.node(spec.node_id))


def _bomb_batch(size: int) -> bytes:
    """A valid v2 batch (CRC and all) of one record whose zstd body is a bomb of ``size``
    bytes: encode_batch is handed the bomb in place of its compressed records."""
    record = Record(offset=0, timestamp=1_700_000_000_000, key=b"k", value=b"v")
    with mock.patch("rillet.records.compress", lambda codec, body: zstd_rle_bomb(size)):
        return encode_batch([record], compression=Compression.ZSTD)


def test_a_decompression_bomb_is_refused_and_the_broker_serves_on(
        fuzz_broker: BrokerProcess) -> None:
    """A 32 KB zstd batch of 1 GiB, produced like any batch, then ListOffsets by timestamp
    (which decompresses it): CORRUPT_MESSAGE for that partition, not an allocation of 1 GiB
    (which, in a pod short of memory, aborts the process or gets it killed)."""
    topic = "fuzz-bomb"
    bomb = _bomb_batch(1 << 30)
    assert len(bomb) < 40_000
    with Wire(fuzz_broker.bootstrap) as w:
        w.request(19, 5, {"topics": [{"name": topic, "num_partitions": 1,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": []}], "timeout": 10000,
                          "validate_only": False})
        _, produced = w.request_frame(0, 9, tagged_frames.produce_v9(1, topic, bomb, False))
        assert produced.responses[0].partition_responses[0].error_code == 0
        by_time = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic,
                   "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                   "timestamp": 1_600_000_000_000}]}]}
        [part] = w.request(2, 7, by_time).topics[0].partitions
        assert part.error_code == CorruptMessage.code
        latest = dict(by_time, topics=[{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}])
        [part] = w.request(2, 7, latest).topics[0].partitions
        assert (part.error_code, part.offset) == (0, 1)
    assert fuzz_broker.alive()


def test_before_authentication_a_sasl_listener_reads_no_large_request(
        fuzz_broker: BrokerProcess) -> None:
    """A frame's own size is the last bound: decoding a 100 MiB request of tiny elements
    costs far more memory than its bytes, so an anonymous peer gets Kafka's 512 KiB."""
    sasl = campaign_targets.single_node_targets(fuzz_broker)[1]
    with Wire(f"{sasl.host}:{sasl.port}") as w:
        w.send_raw(struct.pack(">i", 524289) + b"\0" * 64)
        assert w.is_closed()
    assert "request size 524289 outside [8, 524288] (sasl.server.max.receive.size)" \
        in fuzz_broker.log()
    with Wire(fuzz_broker.bootstrap) as w:  # PLAINTEXT: authenticated from the start
        w.send_raw(struct.pack(">i", 524289) + b"\0" * 64)
        assert not w.is_closed(timeout=0.5)  # still reading the rest of the frame
