"""Sample events for the job, produced with confluent-kafka (librdkafka).

    python -m rillet_spark.produce --bootstrap-servers 127.0.0.1:9092 --topic events \
        --create --partitions 3 --count 1000 --keys 5

    # a steady stream (idempotent, acks=all) until the topic events-stop exists:
    python -m rillet_spark.produce --bootstrap-servers ... --topic events \
        --rate 20 --stop-topic events-stop --flush-event

Events are deterministic for a given seed, so a run can be checked against
`expected_aggregates`, which computes what the job must output (windows aligned to the epoch,
as Spark's tumbling windows are).
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_spark.security import ClientSecurity, SecurityConfigError, librdkafka_options

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


def stream_events(keys: int, *, step_ms: int, start: datetime = DEFAULT_START,
                  seed: int = 1) -> Iterator[Event]:
    """An endless event sequence, one every `step_ms` of event time; its first n events are the
    same whatever n is, so a stream stopped at any point can be checked against
    `expected_aggregates(itertools.islice(stream_events(...), n), ...)`."""
    rng = random.Random(seed)
    for i in itertools.count():
        yield Event(event_id=f"s-{seed}-{i}", key=f"key-{rng.randrange(keys)}",
                    amount=rng.randrange(1, 1000),
                    event_time=start + timedelta(milliseconds=i * step_ms))


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


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 security: dict[str, str] | None = None) -> None:
    """Create `topic`; an existing topic is fine (the demo may run twice)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise


def produce(
    bootstrap: str, topic: str, events: Sequence[Event], *, partitions: int | None = None, timeout: float = 60.0,
    security: dict[str, str] | None = None,
) -> None:
    """Produce every event and wait until all are acknowledged (acks=all); raise on any failure.

    With `partitions`, event i goes to partition i % partitions, so a test knows each record's
    partition without relying on key hashing; otherwise the Kafka key (the event key) decides.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **(security or {})})
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


@dataclass
class StreamResult:
    produced: int
    failed: list[str]
    seconds: float


def stream(bootstrap: str, topic: str, events: Iterator[Event], *, rate: float,
           stop_topic: str | None = None, max_count: int | None = None,
           max_seconds: float | None = None, report: Callable[[str], None] = print,
           report_every_s: float = 10.0, delivery_timeout_s: float = 300.0,
           security: dict[str, str] | None = None) -> StreamResult:
    """Produce `events` at `rate` per second, idempotent with acks=all, until `stop_topic`
    exists, `max_count` were sent or `max_seconds` passed; then wait for every delivery.

    librdkafka retries a retriable failure (a leader moving, too few in-sync replicas while a
    broker restarts) until the delivery timeout, and idempotence keeps those retries from
    writing a record twice, so a stream through broker restarts ends with failed == [].
    """
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5,
                         "delivery.timeout.ms": int(delivery_timeout_s * 1000), **(security or {})})
    failed: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    start = time.monotonic()
    sent, next_stop_check, next_report = 0, start, start + report_every_s
    while True:
        now = time.monotonic()
        if max_count is not None and sent >= max_count:
            break
        if max_seconds is not None and now - start >= max_seconds:
            break
        if stop_topic and now >= next_stop_check:
            if _topic_exists(producer, stop_topic):
                break
            next_stop_check = now + 2.0
        if now >= next_report:
            report(f"progress: {sent} sent, {len(producer)} awaiting acknowledgement, "
                   f"{len(failed)} failed")
            next_report = now + report_every_s
        due = int((now - start) * rate) - sent
        for e in itertools.islice(events, max(0, due)):
            producer.produce(topic, value=e.to_json(), key=e.key.encode(), on_delivery=on_delivery)
            sent += 1
        producer.poll(0.05)
    left = producer.flush(delivery_timeout_s + 30)
    if left:
        failed.append(f"{left} records never acknowledged")
    return StreamResult(produced=sent, failed=failed, seconds=round(time.monotonic() - start, 1))


def _topic_exists(producer: Producer, topic: str) -> bool:
    # All topics, not this one by name: a request naming it would have a broker with
    # auto.create.topics.enable create it, and the stream would stop at once.
    try:
        meta = producer.list_topics(timeout=5)
    except KafkaException:
        return False  # no answer now (a broker restarting): ask again at the next check
    t = meta.topics.get(topic)
    return t is not None and t.error is None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rillet_spark.produce", description="produce sample JSON events")
    p.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    p.add_argument("--topic", default="events")
    p.add_argument("--create", action="store_true", help="create the topic first (existing is fine)")
    p.add_argument("--partitions", type=int, default=3, help="partitions when creating")
    p.add_argument("--count", type=int, default=None,
                   help="events (default 1000); in stream mode at most this many (default: no limit)")
    p.add_argument("--keys", type=int, default=5)
    p.add_argument("--span-seconds", type=int, default=300, help="event times spread over this span")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flush-event", action="store_true",
                   help="end with one event an hour later, so the watermark passes every window above")
    p.add_argument("--rate", type=float, default=0.0,
                   help="stream mode: events per second, idempotent, until --stop-topic exists, "
                        "--count were sent or --max-seconds passed (default: batch mode)")
    p.add_argument("--step-ms", type=int, default=1000, help="stream mode: event time step")
    p.add_argument("--stop-topic", help="stream mode: stop once this topic exists")
    p.add_argument("--max-seconds", type=float, help="stream mode: stop after this long")
    p.add_argument("--user-secret-dir", default=None, metavar="DIR",
                   help="a rillet User's Secret mounted as a folder (as the job's option): SASL_SSL "
                        "with SCRAM-SHA-512 or mutual TLS, whichever the User has")
    p.add_argument("--ca-file", default=None, metavar="FILE",
                   help="the Cluster's CA certificate for TLS (a tls User's Secret carries ca.crt)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        args.security = librdkafka_options(ClientSecurity(
            user_dir=Path(args.user_secret_dir) if args.user_secret_dir else None,
            ca_file=Path(args.ca_file) if args.ca_file else None))
    except SecurityConfigError as exc:
        p.error(str(exc))
    if args.rate > 0:
        return _main_stream(args)
    if args.create:
        create_topic(args.bootstrap_servers, args.topic, args.partitions, security=args.security)
    events = sample_events(args.count or 1000, args.keys, span_seconds=args.span_seconds, seed=args.seed)
    if args.flush_event:
        events.append(flush_event(events))
    produce(args.bootstrap_servers, args.topic, events, security=args.security)
    print(f"produced {len(events)} events to {args.topic} on {args.bootstrap_servers}")
    return 0


def _main_stream(args: argparse.Namespace) -> int:
    """Stream mode: progress lines while it runs, then one `RESULT {json}` line."""
    if args.create:
        create_topic(args.bootstrap_servers, args.topic, args.partitions, security=args.security)
    events = stream_events(args.keys, step_ms=args.step_ms, seed=args.seed)
    result = stream(args.bootstrap_servers, args.topic, events, rate=args.rate,
                    stop_topic=args.stop_topic, max_count=args.count,
                    max_seconds=args.max_seconds, report=lambda line: print(line, flush=True),
                    security=args.security)
    if args.flush_event and not result.failed:
        sent = list(itertools.islice(stream_events(args.keys, step_ms=args.step_ms,
                                                   seed=args.seed), result.produced))
        if sent:
            produce(args.bootstrap_servers, args.topic, [flush_event(sent)], security=args.security)
    print("RESULT " + json.dumps({"produced": result.produced, "failed": len(result.failed),
                                  "errors": result.failed[:5], "seconds": result.seconds,
                                  "keys": args.keys, "step_ms": args.step_ms, "seed": args.seed}),
          flush=True)
    return 1 if result.failed else 0


def flush_event(events: Sequence[Event], after: timedelta = timedelta(hours=1)) -> Event:
    """An event far enough after the others that the watermark closes all their windows.

    Append mode writes a window only once the watermark passes its end, so the last windows of
    a finite data set need a later event to be emitted; this one sits in a window of its own.
    """
    last = max(e.event_time for e in events)
    return Event(event_id="flush", key="__flush__", amount=0, event_time=last + after)


if __name__ == "__main__":
    sys.exit(main())
