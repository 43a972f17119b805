"""Crash safety: kill -9 during a produce loop loses no acknowledged record."""
from __future__ import annotations

import threading
import uuid
from pathlib import Path

from confluent_kafka import Producer

from tests.harness import BrokerProcess
from tests.polling import poll_until

from .clients import confluent_consume, confluent_consume_to_end, create_topic


def _produce_until_killed(bootstrap: str, topic: str, acked: list[int],
                          stop: threading.Event, first: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                  "enable.idempotence": False, "retries": 0,
                  "message.timeout.ms": 3000, "reconnect.backoff.max.ms": 200})

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append(int(msg.value()))

    i = first
    while not stop.is_set():
        try:
            p.produce(topic, key=str(i % 4).encode(), value=str(i).encode(),
                      on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0.001)
    p.flush(5)


def test_kill_minus_nine_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", config={"log.flush.interval.messages": 1,
                                                 "log.segment.bytes": 64 * 1024}).start()
    topic = f"crash-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, partitions=2)
    acked: list[int] = []
    try:
        for round_ in range(3):  # bounded: three crashes
            stop = threading.Event()
            t = threading.Thread(target=_produce_until_killed,
                                 args=(b.bootstrap, topic, acked, stop, round_ * 1_000_000))
            t.start()
            before = len(acked)
            # Not an assertion: the kill comes after at most 10 s either way, and the
            # count of acknowledged records is checked once all rounds are done.
            poll_until(lambda: len(acked) >= before + 300, 10, 0.05)
            b.kill()
            stop.set()
            t.join(15)
            b.start()
        assert len(acked) >= 900
        got = confluent_consume_to_end(b.bootstrap, topic, 2)
        values = [int(m.value) for m in got]
        missing = set(acked) - set(values)
        assert not missing, f"{len(missing)} acknowledged records lost"
        assert len(values) == len(set(values)), "duplicates after restart"
        for p in (0, 1):
            offsets = sorted(m.offset for m in got if m.partition == p)
            assert offsets == list(range(len(offsets))), "offsets not dense"
    finally:
        b.stop()


def test_clean_restart_keeps_data_and_topics(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    topic = f"restart-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, partitions=3)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(500):
        p.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert p.flush(20) == 0
    assert b.stop() == 0  # SIGTERM is a clean shutdown
    b.start()
    try:
        got = confluent_consume(b.bootstrap, topic, 3, 500)
        assert sorted(int(m.value) for m in got) == list(range(500))
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce(topic, key=b"0", value=b"after")
        assert p.flush(20) == 0
        assert len(confluent_consume(b.bootstrap, topic, 3, 501)) == 501
    finally:
        b.stop()
