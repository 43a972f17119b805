"""Single-node produce/consume throughput of rillet with confluent-kafka.

Prints a table: records/s, MB/s, p50/p99 produce latency, broker RSS.
Not a test: run it with `make bench` (or `python bench/produce_consume.py`).
Bounded: a fixed record count per row.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.harness import BrokerProcess  # noqa: E402


def rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of a process in KiB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                  "compression.type": "none", "enable.idempotence": acks == "all"})
    payload = b"x" * size
    keys = [str(i).encode() for i in range(64)]

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)  # a failed message has no ack latency to report
            return
        # librdkafka's own produce-to-ack latency of this message, in seconds.
        latencies.append(msg.latency())  # type: ignore[attr-defined]

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=payload, key=keys[i % 64], on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    undelivered = p.flush(120)
    elapsed = time.perf_counter() - start
    # Rates over a run where records failed or never came back would be meaningless.
    if errors or undelivered or len(latencies) != count:
        raise SystemExit(f"produce to {topic} (acks={acks}): {len(errors)} of {count} records "
                         f"failed (first: {errors[:1]}), {undelivered} still undelivered "
                         f"after 120 s; no numbers reported")
    latencies.sort()
    return {"records_s": count / elapsed, "mb_s": count * size / elapsed / 1e6,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000}


def consume(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> dict[str, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 * 1024 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    errors: list[object] = []
    start = time.perf_counter()
    deadline = start + 120
    while got < count and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                errors.append(m.error())
            else:
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    # A rate over a partial count at the deadline would hide a consumer that stalled.
    if errors or got != count:
        raise SystemExit(f"consume from {topic}: {got} of {count} records in "
                         f"{elapsed:.0f} s, {len(errors)} errors (first: {errors[:1]}); "
                         f"no numbers reported")
    return {"records_s": got / elapsed, "mb_s": got * size / elapsed / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            rows = []
            for acks in ("1", "all"):
                topic = f"bench-acks-{acks}"
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(10)
                prod = produce(broker.bootstrap, topic, args.records, args.size, acks)
                cons = consume(broker.bootstrap, topic, args.partitions, args.records, args.size)
                rss, peak = rss_kib(broker.proc.pid)
                rows.append((acks, prod, cons, rss, peak))
        finally:
            broker.stop()
    print(f"\nrillet single node, confluent-kafka, {args.records} x {args.size} B records, "
          f"{args.partitions} partitions, linger.ms=5\n")
    head = ("acks", "produce rec/s", "produce MB/s", "p50 ms", "p99 ms", "consume rec/s",
            "consume MB/s", "RSS MiB", "peak RSS MiB")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for acks, prod, cons, rss, peak in rows:
        print(f"| {acks} | {prod['records_s']:,.0f} | {prod['mb_s']:.1f} | {prod['p50_ms']:.1f} "
              f"| {prod['p99_ms']:.1f} | {cons['records_s']:,.0f} | {cons['mb_s']:.1f} "
              f"| {rss / 1024:.0f} | {peak / 1024:.0f} |")


if __name__ == "__main__":
    main()
