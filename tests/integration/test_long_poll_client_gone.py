"""A client that hangs up during a long poll frees its connection at once (peer_watch.py).

Without it the broker keeps the connection (TCP CLOSE_WAIT on its side) until the Fetch's
max_wait_ms, which the client chooses (up to 24 days): the fuzz campaign found such
connections piling up."""
from __future__ import annotations

import socket

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.fuzz.targets import closed_by_peer
from tests.harness import BrokerProcess
from tests.polling import wait_until
from tests.wire import Wire

TOPIC = "quiet"
LONG_WAIT_MS = 120_000


def _fetch_body(offset: int) -> dict:
    return {"replica_id": -1, "max_wait": LONG_WAIT_MS, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


def _create_topic(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        admin.close()
    wait_until(lambda: _served(broker), timeout=30, what="the topic served")


def _served(broker: BrokerProcess) -> bool:
    with Wire(broker.bootstrap) as wire:
        answer = wire.request(1, 11, {**_fetch_body(0), "max_wait": 0})
    return answer.responses[0].partitions[0].error_code == 0


def _start_long_poll(broker: BrokerProcess) -> Wire:
    """A Fetch at the end of an empty partition, still unanswered a second later."""
    wire = Wire(broker.bootstrap)
    wire.request(1, 11, _fetch_body(0), expect_response=False)
    wire.sock.settimeout(1.0)
    try:
        wire.sock.recv(1)
        raise AssertionError("the long poll was answered at once")
    except socket.timeout:
        return wire


def test_a_long_poll_whose_client_hangs_up_frees_its_connection(broker: BrokerProcess) -> None:
    _create_topic(broker)
    polls = [_start_long_poll(broker) for _ in range(3)]
    for wire in polls:
        wire.close()
    # Far sooner than the 120 s the polls asked for (without the watch: CLOSE_WAIT till then).
    wait_until(lambda: closed_by_peer(broker) == 0, timeout=10,
               what="the broker to close the connections its clients left")
    # The broker carries on: a poll whose client stays is still answered when a record comes.
    with _start_long_poll(broker) as wire:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send(TOPIC, b"after").get(timeout=30)
        producer.close()
        wire.sock.settimeout(30)
        answer = wire.recv_frame()
        assert answer, "no answer to the waiting poll"
    assert "request failed" not in broker.log()
