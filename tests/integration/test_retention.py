"""Retention deletes whole old segments, moves the log start, and old offsets go out of range."""
from __future__ import annotations

import uuid

from confluent_kafka import Producer

from tests.harness import BrokerProcess
from tests.polling import poll_until

from ..wire import Wire
from .clients import create_topic


def _offsets(w: Wire, topic: str, ts: int) -> int:
    resp = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts}]}]})
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def _fetch_error(w: Wire, topic: str, offset: int) -> int:
    resp = w.request(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1,
                             "max_bytes": 1 << 20, "isolation_level": 0,
                             "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": topic, "partitions": [
                                 {"partition": 0, "fetch_offset": offset,
                                  "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": [], "rack_id": ""})
    return resp.responses[0].partitions[0].error_code


def test_retention_by_size_and_time(broker_factory) -> None:
    b: BrokerProcess = broker_factory({"log.retention.check.interval.ms": 200})
    topic = f"ret-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, partitions=1,
                 config={"segment.bytes": "20000", "retention.bytes": "60000"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(600):
        p.produce(topic, value=b"x" * 500)
        if i % 50 == 0:
            p.flush(10)
    assert p.flush(10) == 0
    with Wire(b.bootstrap) as w:
        log_dir = b.data_dir / f"{topic}-0"

        def size() -> int:
            total = 0
            for segment in log_dir.glob("*.log"):
                try:
                    total += segment.stat().st_size
                except FileNotFoundError:
                    pass  # retention deleted it between the listing and the stat
            return total
        # retention.bytes keeps at most one segment beyond the limit (whole segments go).
        assert poll_until(lambda: size() <= 60000 + 20000, 20, 0.2), \
            f"retention.bytes never brought the log down to 80000 bytes ({size()} left)"
        start = _offsets(w, topic, -2)
        assert start > 0, "retention.bytes never deleted a segment"
        assert _offsets(w, topic, -1) == 600
        assert _fetch_error(w, topic, 0) == 1  # OFFSET_OUT_OF_RANGE below the log start
        assert _fetch_error(w, topic, start) == 0

        # retention.ms: everything older goes, log start reaches the end.
        w.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": topic,
                                         "configs": [{"name": "retention.ms",
                                                      "config_operation": 0,
                                                      "value": "100"}]}],
                          "validate_only": False})
        assert poll_until(lambda: _offsets(w, topic, -2) == 600, 20, 0.2), \
            f"retention.ms never moved the log start to 600 (it is {_offsets(w, topic, -2)})"
