"""Wire-level behaviour clients rely on: long poll, legacy versions, acks, epochs, timestamps."""
from __future__ import annotations

import struct
import threading
import time
import uuid

from rillet.records import Record, decode_records, encode_batch, parse_batches
from tests.harness import BrokerProcess

from .. import tagged_frames
from ..wire import Wire
from .clients import create_topic


def _batch(n: int = 3, ts: int = 1_700_000_000_000) -> bytes:
    return encode_batch([Record(offset=i, timestamp=ts + i, key=b"k", value=b"v%d" % i,
                                headers=[]) for i in range(n)])


def _produce(w: Wire, topic: str, records: bytes, acks: int = 1, version: int = 9):
    resp = w.request(0, version, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def _fetch(w: Wire, topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1):
    resp = w.request(1, 12, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes,
                             "max_bytes": 1 << 20, "topics": [{"topic": topic, "partitions": [
                                 {"partition": 0, "fetch_offset": offset,
                                  "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": []})
    return resp.responses[0].partitions[0]


def test_long_poll_is_woken_by_a_produce(broker: BrokerProcess) -> None:
    topic = f"poll-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    result: dict = {}
    fetch_sent = threading.Event()

    def poll() -> None:
        with Wire(broker.bootstrap, timeout=30) as w:
            start = time.monotonic()
            fetch_sent.set()
            result["part"] = _fetch(w, topic, 0, max_wait_ms=20000)
            result["elapsed"] = time.monotonic() - start

    t = threading.Thread(target=poll)
    t.start()
    # The produce must come after the fetch is parked, or nothing is woken: wait
    # for the fetch to be on its way, then give the broker time to park it.
    assert fetch_sent.wait(10), "the fetch thread never got to send its fetch"
    time.sleep(0.5)
    with Wire(broker.bootstrap) as w:
        assert _produce(w, topic, _batch()).error_code == 0
    t.join(25)
    assert not t.is_alive() and "part" in result, "the long poll never returned"
    assert result["part"].error_code == 0
    assert len(parse_batches(result["part"].records)) == 1
    assert result["elapsed"] >= 0.3, "the fetch returned before the produce: nothing was woken"
    assert result["elapsed"] < 10, "the fetch waited for max_wait instead of the produce"


def test_empty_long_poll_waits_for_max_wait(broker: BrokerProcess) -> None:
    topic = f"idle-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as w:
        start = time.monotonic()
        part = _fetch(w, topic, 0, max_wait_ms=700)
        assert time.monotonic() - start >= 0.6
        assert part.error_code == 0 and part.records == b"" and part.high_watermark == 0


def test_produce_v2_is_answered_unsupported_version(broker: BrokerProcess) -> None:
    topic = b"legacy"
    body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(topic)) \
        + topic + struct.pack(">i", 1) + struct.pack(">ii", 0, 4) + b"\0\0\0\0"
    header = struct.pack(">hhih", 0, 2, 42, 1) + b"c"
    with Wire(broker.bootstrap) as w:
        w.send_raw(struct.pack(">i", len(header + body)) + header + body)
        frame = w.recv_frame()
    corr, topics = struct.unpack_from(">ii", frame)
    name_len = struct.unpack_from(">h", frame, 8)[0]
    pos = 10 + name_len
    count, index, error = struct.unpack_from(">iih", frame, pos)
    assert (corr, topics, count, index, error) == (42, 1, 1, 0, 35)


def test_invalid_acks_and_corrupt_batches_fail_only_their_partition(broker: BrokerProcess) -> None:
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as w:
        assert _produce(w, topic, _batch(), acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
        corrupt = bytearray(_batch())
        corrupt[-1] ^= 0xFF
        assert _produce(w, topic, bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
        ok = _produce(w, topic, _batch())
        assert ok.error_code == 0 and ok.base_offset == 0
        assert _produce(w, "no-such-topic-" + uuid.uuid4().hex[:4], _batch()).error_code == 3
        assert _produce(w, "__consumer_offsets", _batch()).error_code == 17  # internal topic


def test_acks_zero_gets_no_response_but_is_stored(broker: BrokerProcess) -> None:
    topic = f"zero-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as w:
        w.request(0, 9, {"acks": 0, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": _batch()}]}]},
            expect_response=False)
        # The next response on this connection is the ApiVersions answer, not a produce one.
        resp = w.request(18, 3, {"client_software_name": "a", "client_software_version": "1"})
        assert resp.error_code == 0
        assert _fetch(w, topic, 0).high_watermark == 3


def test_log_append_time_topics_stamp_the_broker_time(broker: BrokerProcess) -> None:
    topic = f"lat-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1,
                 config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Wire(broker.bootstrap) as w:
        resp = _produce(w, topic, _batch(ts=1000))
        assert resp.error_code == 0 and resp.log_append_time is not None
        header, records = decode_records(_fetch(w, topic, 0).records)
        assert header.timestamp_type == 1 and header.max_timestamp >= before


def test_offset_for_leader_epoch_and_epochs_in_batches(broker: BrokerProcess) -> None:
    topic = f"epoch-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as w:
        _produce(w, topic, _batch(5))
        resp = w.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
        part = resp.topics[0].partitions[0]
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 5)
        fenced = w.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": 7, "leader_epoch": 0}]}]})
        assert fenced.topics[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH
        header = parse_batches(_fetch(w, topic, 0).records)[0]
        assert header.partition_leader_epoch == 0 and header.base_offset == 0


def test_unknown_tagged_fields_are_skipped_on_every_api_tried(broker: BrokerProcess) -> None:
    """KIP-482: newer clients send tags this broker's schemas do not know, in the header, at
    the top level and inside structs; each request is answered on one connection kept open."""
    topic = f"tags-{uuid.uuid4().hex[:6]}"
    with Wire(broker.bootstrap) as w:
        corr, versions = w.request_frame(18, 3, tagged_frames.api_versions_v3(1))
        assert (corr, versions.error_code) == (1, 0)
        assert {k.api_key for k in versions.api_keys} >= {0, 1, 3, 18, 19}

        corr, created = w.request_frame(19, 7, tagged_frames.create_topics_v7(2, topic))
        assert (corr, created.topics[0].name, created.topics[0].error_code) == (2, topic, 0)
        assert created.topics[0].num_partitions == 2

        corr, metadata = w.request_frame(3, 12, tagged_frames.metadata_v12(3, topic))
        assert corr == 3 and metadata.topics[0].error_code == 0
        assert len(metadata.topics[0].partitions) == 2

        corr, produced = w.request_frame(0, 9, tagged_frames.produce_v9(4, topic, _batch(4)))
        part = produced.responses[0].partition_responses[0]
        assert (corr, part.error_code, part.base_offset) == (4, 0, 0)

        corr, fetched = w.request_frame(1, 12, tagged_frames.fetch_v12(5, topic))
        part = fetched.responses[0].partitions[0]
        assert (corr, part.error_code, part.high_watermark) == (5, 0, 4)
        assert len(decode_records(part.records)[1]) == 4
    assert broker.alive()
    assert "Unknown tagged field" not in broker.log()
