"""Sample events for the job, produced with confluent-kafka (librdkafka).

    python -m rillet_spark.produce --bootstrap-servers 127.0.0.1:9092 --topic events \
        --create --partitions 3 --count 1000 --keys 5

Events are deterministic for a given seed, so a run can be checked against
`expected_aggregates`, which computes what the job must output (windows aligned to the epoch,
as Spark's tumbling windows are).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Sequence

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Event:
    event_id: str
    key: str
    amount: int
    event_time: datetime

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "event_id": self.event_id,
                "key": self.key,
                "amount": self.amount,
                "event_time": self.event_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
        ).encode()


def sample_events(
    count: int, keys: int, *, start: datetime = DEFAULT_START, span_seconds: int = 300, seed: int = 1
) -> list[Event]:
    """`count` events over `keys` keys, times ascending from `start` across `span_seconds`."""
    rng = random.Random(seed)
    step = span_seconds / max(count, 1)
    return [
        Event(
            event_id=f"e-{seed}-{i}",
            key=f"key-{rng.randrange(keys)}",
            amount=rng.randrange(1, 1000),
            event_time=start + timedelta(seconds=i * step),
        )
        for i in range(count)
    ]


def window_start(t: datetime, window_seconds: int) -> datetime:
    """Start of the tumbling window holding t (windows aligned to the Unix epoch, like Spark's)."""
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % window_seconds, tz=timezone.utc)


def expected_aggregates(events: Iterable[Event], window_seconds: int) -> dict[tuple[datetime, str], tuple[int, int, int, int]]:
    """(window_start, key) -> (events, amount_sum, amount_min, amount_max)."""
    groups: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    for e in events:
        groups[(window_start(e.event_time, window_seconds), e.key)].append(e.amount)
    return {k: (len(v), sum(v), min(v), max(v)) for k, v in groups.items()}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create `topic`; an existing topic is fine (the demo may run twice)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise


def produce(
    bootstrap: str, topic: str, events: Sequence[Event], *, partitions: int | None = None, timeout: float = 60.0
) -> None:
    """Produce every event and wait until all are acknowledged (acks=all); raise on any failure.

    With `partitions`, event i goes to partition i % partitions, so a test knows each record's
    partition without relying on key hashing; otherwise the Kafka key (the event key) decides.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i, e in enumerate(events):
        extra = {} if partitions is None else {"partition": i % partitions}
        producer.produce(topic, value=e.to_json(), key=e.key.encode(), on_delivery=on_delivery, **extra)
        producer.poll(0)
    left = producer.flush(timeout)
    if left or errors:
        raise RuntimeError(f"produce to {topic}: {left} unacknowledged, errors: {errors[:3]}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rillet_spark.produce", description="produce sample JSON events")
    p.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    p.add_argument("--topic", default="events")
    p.add_argument("--create", action="store_true", help="create the topic first (existing is fine)")
    p.add_argument("--partitions", type=int, default=3, help="partitions when creating")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--keys", type=int, default=5)
    p.add_argument("--span-seconds", type=int, default=300, help="event times spread over this span")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flush-event", action="store_true",
                   help="end with one event an hour later, so the watermark passes every window above")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.create:
        create_topic(args.bootstrap_servers, args.topic, args.partitions)
    events = sample_events(args.count, args.keys, span_seconds=args.span_seconds, seed=args.seed)
    if args.flush_event:
        events.append(flush_event(events))
    produce(args.bootstrap_servers, args.topic, events)
    print(f"produced {len(events)} events to {args.topic} on {args.bootstrap_servers}")
    return 0


def flush_event(events: Sequence[Event], after: timedelta = timedelta(hours=1)) -> Event:
    """An event far enough after the others that the watermark closes all their windows.

    Append mode writes a window only once the watermark passes its end, so the last windows of
    a finite data set need a later event to be emitted; this one sits in a window of its own.
    """
    last = max(e.event_time for e in events)
    return Event(event_id="flush", key="__flush__", amount=0, event_time=last + after)


if __name__ == "__main__":
    sys.exit(main())
