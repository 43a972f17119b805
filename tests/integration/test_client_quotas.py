"""Client quotas (KIP-13/55/124/546) against a real node, with Kafka's own tools and clients.

kafka-configs (the Java admin client: AlterClientQuotas, DescribeClientQuotas) sets,
describes and deletes quotas of users, client ids, their combination and the defaults; a
producer_byte_rate holds one producer (librdkafka) to its rate while a producer with
another client id, on the same node at the same time, is not throttled at all; a
consumer_byte_rate holds one consumer and not another; a request_percentage throttles a
client that keeps the broker busy, and mutes its connection for the wait.

With RILLET_JAVA_TARGET=kafka the same tests run against Apache Kafka.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

import pytest
from confluent_kafka import Producer

from tests.integration.java_tools import (KafkaTools, java_target_with,  # noqa: F401
                                          kafka_jars, topic_name)

# Two samples of one second: the burst a fresh quota lets through (one sample's worth) is
# small next to the measured run, and the rate follows the bound within a second or two.
SETTINGS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
QUOTA_BYTES_S = 100_000
RECORD = b"x" * 1000
WARMUP_S = 3.0      # past the first sample's burst
MEASURE_S = 12.0
FLOOD_S = 6.0      # the unthrottled client's run, from the start


@pytest.fixture
def tools(java_target_with: Callable[[dict[str, str]], KafkaTools]) -> KafkaTools:  # noqa: F811
    return java_target_with(SETTINGS)


def _describe(tools: KafkaTools, *entity: str) -> list[str]:
    return tools.configs("--describe", *entity).ok().lines


def test_kafka_configs_alters_and_describes_user_and_client_quotas(tools: KafkaTools) -> None:
    alice = ("--entity-type", "users", "--entity-name", "alice")
    app = ("--entity-type", "clients", "--entity-name", "app")
    tools.configs("--alter", *alice, "--add-config",
                  "producer_byte_rate=1024,consumer_byte_rate=2048").ok()
    tools.configs("--alter", "--entity-type", "users", "--entity-default", "--add-config",
                  "request_percentage=50").ok()
    tools.configs("--alter", *app, "--add-config", "producer_byte_rate=4096").ok()
    tools.configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                  "consumer_byte_rate=8192").ok()
    tools.configs("--alter", *alice, *app, "--add-config", "controller_mutation_rate=10").ok()

    assert _describe(tools, *alice) == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1024.0"]
    assert sorted(_describe(tools, "--entity-type", "users")) == [
        "Quota configs for the default user-principal are request_percentage=50.0",
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1024.0"]
    assert sorted(_describe(tools, "--entity-type", "clients")) == [
        "Quota configs for client-id 'app' are producer_byte_rate=4096.0",
        "Quota configs for the default client-id are consumer_byte_rate=8192.0"]
    assert _describe(tools, *alice, *app) == [
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "controller_mutation_rate=10.0"]

    # Changing one value leaves the others; deleting the last one removes the entity.
    tools.configs("--alter", *alice, "--add-config", "producer_byte_rate=512",
                  "--delete-config", "consumer_byte_rate").ok()
    assert _describe(tools, *alice) == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=512.0"]
    tools.configs("--alter", *app, "--delete-config", "producer_byte_rate").ok()
    assert _describe(tools, *app) == []
    # A byte rate is a whole number (the tool itself refuses unknown keys).
    bad = tools.configs("--alter", *app, "--add-config", "producer_byte_rate=10.5")
    assert bad.returncode != 0, bad.describe()
    assert _describe(tools, *app) == []


class MeasuredProducer:
    """A librdkafka producer sending as fast as it can for a bounded time, noting when each
    record was acknowledged and the largest throttle time its broker reported."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.acked: list[tuple[float, int]] = []   # (monotonic time, payload bytes)
        self.failed = 0
        self.max_throttle_ms = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1",
            "linger.ms": 5, "batch.size": 16384, "statistics.interval.ms": 500,
            "stats_cb": self._stats, "queue.buffering.max.kbytes": 256})

    def _stats(self, raw: str) -> None:
        import json
        stats: dict[str, Any] = json.loads(raw)
        for b in stats.get("brokers", {}).values():
            self.max_throttle_ms = max(self.max_throttle_ms, b.get("throttle", {}).get("max", 0))

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
        else:
            self.acked.append((time.monotonic(), len(msg.value())))

    def run(self, topic: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.producer.produce(topic, RECORD, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.flush(30)
        self.producer.poll(1.0)   # a last statistics report

    def close(self) -> None:
        """Drop the client now, so it does not try to reconnect once the node stops."""
        del self.producer

    def rate_after(self, start: float, seconds: float) -> float:
        """Acknowledged payload bytes per second over [start, start + seconds], as the slope
        of the acknowledged bytes over time (least squares: a quota admits bytes in steps,
        one sample window at a time, and the slope is not thrown by where a step falls)."""
        points, total = [], 0
        for at, size in self.acked:
            total += size
            if start <= at <= start + seconds:
                points.append((at, total))
        assert len(points) > 20, f"only {len(points)} acknowledgements in the window"
        mean_t = sum(t for t, _ in points) / len(points)
        mean_b = sum(b for _, b in points) / len(points)
        num = sum((t - mean_t) * (b - mean_b) for t, b in points)
        den = sum((t - mean_t) ** 2 for t, _ in points)
        return num / den


def test_producer_byte_rate_holds_one_client_and_not_another(tools: KafkaTools,
                                                              topic_name: str) -> None:
    tools.create_topic(topic_name, 1)
    tools.configs("--alter", "--entity-type", "clients", "--entity-name", "slow",
                  "--add-config", f"producer_byte_rate={QUOTA_BYTES_S}").ok()
    slow = MeasuredProducer(tools.bootstrap, "slow")
    fast = MeasuredProducer(tools.bootstrap, "fast")
    started = time.monotonic()
    side = threading.Thread(target=fast.run, args=(topic_name, FLOOD_S), daemon=True)
    side.start()
    slow.run(topic_name, WARMUP_S + MEASURE_S)
    side.join(60)
    assert not side.is_alive() and slow.failed == 0 and fast.failed == 0
    slow.close()
    fast.close()

    # Never over the bound, while the other client floods the node and after.
    rate = slow.rate_after(started + WARMUP_S, MEASURE_S)
    assert rate <= 1.1 * QUOTA_BYTES_S, rate
    # Nor held under it, once the flood is over (during it, the slow client's own thread
    # competes with the flood for this machine's CPU). The quota counts whole requests
    # (headers and batch framing too): the payload rate sits a little under the bound.
    calm = slow.rate_after(started + FLOOD_S + 1, WARMUP_S + MEASURE_S - FLOOD_S - 1)
    assert 0.9 * QUOTA_BYTES_S <= calm <= 1.1 * QUOTA_BYTES_S, calm
    assert slow.max_throttle_ms > 0
    # The other client id shares the node and the topic, and is never throttled.
    assert fast.max_throttle_ms == 0
    fast_bytes = sum(size for _, size in fast.acked)
    assert fast_bytes > 3 * QUOTA_BYTES_S * FLOOD_S / 2, fast_bytes


def _throttle_max(stats: list[int], raw: str) -> None:
    import json
    for b in json.loads(raw).get("brokers", {}).values():
        stats[0] = max(stats[0], b.get("throttle", {}).get("max", 0))


def _read_all(bootstrap: str, topic: str, client_id: str, count: int) -> tuple[float, int, int]:
    """librdkafka reads partition 0 from the start until ``count`` records: (seconds,
    payload bytes, largest throttle time its broker answered)."""
    from confluent_kafka import Consumer, TopicPartition
    throttle = [0]
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": f"g-{client_id}", "enable.auto.commit": False,
                         "statistics.interval.ms": 500,
                         "stats_cb": lambda raw: _throttle_max(throttle, raw)})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        started, seen, size = time.monotonic(), 0, 0
        deadline = started + 60
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen, size = seen + 1, size + len(msg.value())
        took = time.monotonic() - started
        assert seen == count, f"{client_id} read {seen} of {count}"
        end = time.monotonic() + 2
        while time.monotonic() < end:   # a statistics report after the last fetch
            consumer.poll(0.2)
        return took, size, throttle[0]
    finally:
        consumer.close()


def test_consumer_byte_rate_holds_one_reader_and_not_another(tools: KafkaTools,
                                                              topic_name: str) -> None:
    tools.create_topic(topic_name, 1)
    producer = Producer({"bootstrap.servers": tools.bootstrap, "linger.ms": 5,
                         "batch.size": 16384})
    for _ in range(120):
        producer.produce(topic_name, RECORD)
    assert producer.flush(30) == 0
    rate = 20_000
    tools.configs("--alter", "--entity-type", "clients", "--entity-name", "slow-reader",
                  "--add-config", f"consumer_byte_rate={rate}").ok()
    took, size, throttle = _read_all(tools.bootstrap, topic_name, "slow-reader", 120)
    # 120 KB at 20 KB/s, the first window's worth at once: about 5 s, and throttled.
    assert throttle > 0 and size / took < 1.5 * rate, (took, size, throttle)
    took, size, throttle = _read_all(tools.bootstrap, topic_name, "fast-reader", 120)
    assert throttle == 0 and size / took > 1.5 * rate, (took, size, throttle)


def test_request_percentage_throttles_a_busy_client(tools: KafkaTools) -> None:
    """request_percentage=0.1: a client whose requests keep the broker busy more than 0.1% of
    the time is answered with a wait, and its connection is muted for that long."""
    from tests.wire import Wire
    tools.configs("--alter", "--entity-type", "clients", "--entity-name", "wire-test",
                  "--add-config", "request_percentage=0.1").ok()
    metadata = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
    with Wire(tools.bootstrap, timeout=30) as wire:
        deadline, sent = time.monotonic() + 30, 0
        waited, asked_at, round_trip = 0.0, 0.0, math.inf
        # Until a wait long beside an unthrottled round trip (the quickest seen), so that an
        # unmuted connection could not pass the check below by its own slowness.
        while time.monotonic() < deadline and sent < 5000:
            asked_at = time.monotonic()
            waited = wire.request(3, 12, metadata).throttle_time.total_seconds()
            sent += 1
            if waited == 0:
                round_trip = min(round_trip, time.monotonic() - asked_at)
            elif waited > 4 * round_trip:
                break
        assert waited > 4 * round_trip, (f"{sent} Metadata requests in 30 s: last wait "
                                         f"{waited} s, round trip {round_trip} s")
        wire.request(3, 12, metadata)
        # Muted: the broker decided the wait after `asked_at` and reads nothing more from
        # this connection until it is over, so the next answer cannot come sooner, however
        # late this process got to ask on a loaded machine.
        answered = time.monotonic() - asked_at
        assert answered >= waited, (waited, answered, sent)
