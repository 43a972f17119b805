"""connections.max.idle.ms: a connection that sends nothing for that long is closed by the
broker (as Kafka's selector closes it), one in use stays, and a request in progress (a long
poll longer than the setting) is answered, not cut off, and so is one a quota muted for longer
than the setting. A request that stops half sent is idle too; one arriving slowly is not. A
negative setting never closes one."""
from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from rillet.protocol.build import build
from rillet.protocol.codec import encode_request, request_schema
from rillet.records import Record, encode_batch
from tests.harness import BrokerProcess
from tests.polling import wait_until
from tests.tcp_proxy import recv_exact
from tests.wire import Wire

from .clients import create_topic

IDLE_MS = 1500
# The sweep runs every tenth of the setting: closed within 1.1x of it, plus this process's
# and the broker's scheduling on a loaded machine.
CLOSED_WITHIN_S = 20.0
API_VERSIONS = {"client_software_name": "idle-test", "client_software_version": "1"}


def _idle_broker(broker_factory) -> BrokerProcess:
    return broker_factory(config={"connections.max.idle.ms": IDLE_MS})


def _closed_as_idle(broker: BrokerProcess, wire: Wire, start: float) -> None:
    """Wait for the broker to close ``wire``; not before the setting from ``start``, and
    logged as idle with its port."""
    port = wire.sock.getsockname()[1]
    wait_until(lambda: wire.is_closed(timeout=0.5), timeout=CLOSED_WITHIN_S,
               what="the broker to close the idle connection")
    waited = time.monotonic() - start
    assert waited >= IDLE_MS / 1000, f"closed after {waited:.2f}s of {IDLE_MS} ms idle"
    assert f"from 127.0.0.1:{port}" in "".join(
        line for line in broker.log().splitlines() if "closing idle connection" in line)


def test_an_idle_connection_is_closed_after_the_setting_and_not_before(broker_factory) -> None:
    broker = _idle_broker(broker_factory)
    with Wire(broker.bootstrap) as wire:
        # Read before the request: the broker's idle clock (the same monotonic clock) starts
        # once the answer has gone out, after this.
        start = time.monotonic()
        assert wire.request(18, 3, API_VERSIONS).error_code == 0
        _closed_as_idle(broker, wire, start)
    # The broker carries on: a new connection is served.
    with Wire(broker.bootstrap) as wire:
        assert wire.request(18, 3, API_VERSIONS).error_code == 0


def _api_versions_frame() -> bytes:
    return encode_request(18, 3, 1, "wire-test", build(request_schema(18, 3), API_VERSIONS))


def test_a_request_that_stops_half_sent_is_closed_as_idle(broker_factory) -> None:
    broker = _idle_broker(broker_factory)
    frame = _api_versions_frame()
    with Wire(broker.bootstrap) as wire:
        start = time.monotonic()
        wire.send_raw(frame[:len(frame) // 2])   # its size and then half of it
        _closed_as_idle(broker, wire, start)


def test_a_request_arriving_slowly_is_answered(broker_factory) -> None:
    idle_ms = 3000
    broker = broker_factory(config={"connections.max.idle.ms": idle_ms})
    frame = _api_versions_frame()
    chunks = [frame[i:i + 3] for i in range(0, len(frame), 3)]
    # A chunk every tenth of the setting (a late one would have to be 9 tenths late to
    # close it), spread over longer than the setting.
    gap = idle_ms / 1000 / 10
    assert (len(chunks) - 1) * gap > idle_ms / 1000, len(frame)
    with Wire(broker.bootstrap) as wire:
        started = time.monotonic()
        for i, chunk in enumerate(chunks):
            if i:
                time.sleep(gap)   # the client's pace, not a wait for the broker
            wire.send_raw(chunk)
        sending = time.monotonic() - started
        assert sending > idle_ms / 1000
        # Answered: the connection stayed open while the request was coming in.
        assert len(wire.recv_frame()) > 8
    assert "closing idle connection" not in broker.log()


def test_a_negative_setting_never_closes_an_idle_connection(broker_factory) -> None:
    # Kafka's selector keeps no idle expiry for a negative setting.
    broker = broker_factory(config={"connections.max.idle.ms": -1})
    with Wire(broker.bootstrap) as wire:
        assert wire.request(18, 3, API_VERSIONS).error_code == 0
        # Idle for twice the setting the other tests close at: still open, still served.
        assert not wire.is_closed(timeout=2 * IDLE_MS / 1000)
        assert wire.request(18, 3, API_VERSIONS).error_code == 0
    assert "closing idle connection" not in broker.log()


def test_a_connection_in_use_stays_open(broker_factory) -> None:
    idle_ms = 3000
    broker = broker_factory(config={"connections.max.idle.ms": idle_ms})
    with Wire(broker.bootstrap) as wire:
        # Twice the setting, a request every tenth of it: never idle long enough (this
        # process would have to stall for 9 tenths of the setting).
        deadline = time.monotonic() + 2 * idle_ms / 1000
        while time.monotonic() < deadline:
            assert wire.request(18, 3, API_VERSIONS).error_code == 0
            time.sleep(idle_ms / 1000 / 10)   # the client's pace, not a wait for the broker
        assert not wire.is_closed(timeout=0.05)
    assert "closing idle connection" not in broker.log()


def test_a_long_poll_longer_than_the_setting_is_answered(broker_factory) -> None:
    broker = _idle_broker(broker_factory)
    with Wire(broker.bootstrap, timeout=30) as wire:   # one request: never idle meanwhile
        created = wire.request(19, 7, {"timeout": 15000, "validate_only": False, "topics": [
            {"name": "quiet", "num_partitions": 1, "replication_factor": 1,
             "assignments": [], "configs": []}]})
    assert created.topics[0].error_code == 0, created
    max_wait_ms = 3 * IDLE_MS
    body = {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "quiet", "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with Wire(broker.bootstrap, timeout=60) as wire:
        wait_until(lambda: wire.request(1, 11, {**body, "max_wait": 0})
                   .responses[0].partitions[0].error_code == 0,
                   timeout=30, what="the topic served")
        started = time.monotonic()
        answer = wire.request(1, 11, body)
        waited = time.monotonic() - started
        assert answer.responses[0].partitions[0].error_code == 0
        assert answer.responses[0].partitions[0].records in (None, b"")
        # It was held for its max_wait, past the idle setting, and answered.
        assert waited >= max_wait_ms / 1000 - 0.1


def test_a_connection_muted_by_a_quota_past_the_setting_is_answered(broker_factory) -> None:
    broker = broker_factory(config={"connections.max.idle.ms": IDLE_MS,
                                    "quota.window.num": 2, "quota.window.size.seconds": 1})
    create_topic(broker.bootstrap, "muted", partitions=1)
    with Wire(broker.bootstrap) as admin:
        # The Wire's client id, held to 10 kB/s.
        altered = admin.request(49, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": "wire-test"}],
            "ops": [{"key": "producer_byte_rate", "value": 10_000, "remove": False}]}]})
        assert altered.entries[0].error_code == 0, altered
    batch = encode_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None,
                                 value=b"x" * 40_000)])
    with Wire(broker.bootstrap, timeout=60) as wire:
        asked_at = time.monotonic()
        produced = wire.request(0, 9, {"transactional_id": None, "acks": 1, "timeout": 10000,
                                       "topic_data": [{"name": "muted", "partition_data": [
                                           {"index": 0, "records": batch}]}]})
        assert produced.responses[0].partition_responses[0].error_code == 0, produced
        # Four times the rate over the first one-second span: about 3 s to wait.
        waited = produced.throttle_time.total_seconds()
        assert waited > IDLE_MS / 1000, f"muted for {waited} s only"
        # Asked at once: the broker reads it only when the mute is over, past the idle
        # setting, and answers it; the muted connection was never idle.
        metadata = {"topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}
        assert wire.request(3, 12, metadata).brokers, "no answer"
        assert time.monotonic() - asked_at >= waited
    assert "closing idle connection" not in broker.log()


# Answers of 4 MB partitions: larger than the kernel's send and receive buffers together
# (the send buffer grows up to tcp_wmem's largest), so that a peer that stops reading leaves
# the broker's write waiting; or one partition small enough for the kernel to take whole.
BIG_RECORD = 500_000
PER_PARTITION = 8
STALLED = "read nothing of its answer"
RECEIVE_BUFFER = 64 * 1024


def _partitions_past_the_kernel() -> int:
    largest_send_buffer = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    return max(4, 2 * largest_send_buffer // (BIG_RECORD * PER_PARTITION) + 1)


def _big_topic(broker: BrokerProcess, topic: str, partitions: int,
               per_partition: int = PER_PARTITION) -> None:
    create_topic(broker.bootstrap, topic, partitions=partitions)
    with Wire(broker.bootstrap, timeout=60) as wire:
        for partition in range(partitions):
            for _ in range(per_partition):
                batch = encode_batch([Record(offset=0, timestamp=int(time.time() * 1000),
                                             key=None, value=b"x" * BIG_RECORD)])
                produced = wire.request(0, 9, {
                    "transactional_id": None, "acks": 1, "timeout": 10000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": partition, "records": batch}]}]})
                assert produced.responses[0].partition_responses[0].error_code == 0, produced


def _fetch_everything(wire: Wire, topic: str, partitions: int) -> int:
    """Ask for every partition whole in one answer, read none of it; the answer's size."""
    each = 2 * BIG_RECORD * PER_PARTITION
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": each * partitions,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": each}
                for p in range(partitions)]}]}
    wire.request(1, 11, body, expect_response=False)
    return struct.unpack(">i", recv_exact(wire.sock, 4))[0]


def _read_paced(wire: Wire, count: int, pause_s: float) -> int:
    """Read ``count`` bytes at most a receive buffer at a time, pausing between reads."""
    got = 0
    while got < count:
        chunk = wire.sock.recv(min(RECEIVE_BUFFER, count - got))
        assert chunk, f"closed after {got} of {count} bytes"
        got += len(chunk)
        time.sleep(pause_s)   # the client's pace, not a wait for the broker
    return got


def _reset_before_the_end(wire: Wire, got: int, size: int) -> None:
    """What this side's kernel holds may still be read, then the reset (a drop: the broker's
    kernel keeps nothing of the answer); never the rest of it, and a read that times out
    fails the test."""
    with pytest.raises(ConnectionResetError):
        while chunk := wire.sock.recv(1 << 20):
            got += len(chunk)
    assert got < size, f"{got} of {size} bytes read"


def test_a_peer_that_stops_reading_its_answer_is_dropped(broker_factory) -> None:
    broker = _idle_broker(broker_factory)
    partitions = _partitions_past_the_kernel()   # many file ranges, framing bytes between
    _big_topic(broker, "big", partitions)
    with Wire(broker.bootstrap, timeout=30, receive_buffer=RECEIVE_BUFFER) as wire:
        port = wire.sock.getsockname()[1]
        size = _fetch_everything(wire, "big", partitions)
        got = _read_paced(wire, 2_000_000, 0.01)   # some of it, then nothing
        stopped = time.monotonic()
        wait_until(lambda: STALLED in broker.log(), timeout=CLOSED_WITHIN_S,
                   what="the broker to drop the connection that stopped reading")
        waited = time.monotonic() - stopped
        assert waited >= IDLE_MS / 1000 - 0.1, f"dropped after {waited:.2f}s stalled"
        assert f"from 127.0.0.1:{port}" in "".join(
            line for line in broker.log().splitlines() if STALLED in line)
        _reset_before_the_end(wire, got, size)
    # The broker carries on, and dropped it without a fault (asyncio's sendfile included).
    with Wire(broker.bootstrap) as other:
        assert other.request(18, 3, API_VERSIONS).error_code == 0
    assert " ERROR " not in broker.log(), broker.log()[-3000:]


def test_an_unread_answer_the_kernel_took_whole_is_dropped_when_idle(broker_factory) -> None:
    broker = _idle_broker(broker_factory)
    _big_topic(broker, "small", 1, per_partition=2)   # 1 MB: the broker's write completes
    with Wire(broker.bootstrap, timeout=30, receive_buffer=RECEIVE_BUFFER) as wire:
        start = time.monotonic()
        size = _fetch_everything(wire, "small", 1)
        wait_until(lambda: "closing idle connection" in broker.log(), CLOSED_WITHIN_S,
                   "the broker to close the idle connection")
        assert time.monotonic() - start >= IDLE_MS / 1000
        assert STALLED not in broker.log()
        _reset_before_the_end(wire, 4, size)


def test_a_peer_that_reads_its_answer_slowly_gets_all_of_it(broker_factory) -> None:
    idle_ms = 3000
    broker = broker_factory(config={"connections.max.idle.ms": idle_ms})
    partitions = _partitions_past_the_kernel()
    _big_topic(broker, "slow", partitions)
    with Wire(broker.bootstrap, timeout=60, receive_buffer=RECEIVE_BUFFER) as wire:
        started = time.monotonic()
        size = _fetch_everything(wire, "slow", partitions)
        # At most 64 kB every 40 ms, 1.6 MB/s: the broker's write waits on this pace for
        # all of the answer but the last few MB, longer than the setting (a pause of this
        # process would have to last 3 s to close it).
        got = _read_paced(wire, size, 0.04)
        took = time.monotonic() - started
    assert got == size > BIG_RECORD * PER_PARTITION * partitions
    assert took > 2 * idle_ms / 1000, f"read in {took:.1f} s: too fast to tell"
    assert STALLED not in broker.log()
