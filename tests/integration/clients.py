"""Produce/consume helpers per client library, so one test body covers all three."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(bootstrap: str, name: str, partitions: int = 3,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name]
    fut.result(timeout=15)


def make_records(n: int, base_ts: int, value_size: int = 20) -> list[dict[str, Any]]:
    return [{"key": f"key-{i % 7}".encode(),
             "value": (f"value-{i}-".encode() * value_size)[:max(value_size, 12)],
             "headers": [("seq", str(i).encode()), ("empty", b"")],
             "timestamp": base_ts + i} for i in range(n)]


# -- confluent-kafka ----------------------------------------------------------------

def confluent_produce(bootstrap: str, topic: str, records: list[dict[str, Any]],
                      codec: str, acks: str, extra: dict[str, Any] | None = None) -> list[Any]:
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": acks,
                  "linger.ms": 5, **(extra or {})})
    for r in records:
        p.produce(topic, key=r["key"], value=r["value"], headers=r["headers"],
                  timestamp=r["timestamp"],
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0
    return errors


def confluent_consume(bootstrap: str, topic: str, partitions: int, expected: int,
                      timeout: float = 30) -> list[Msg]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.message.max.bytes": 2 * 1024 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise RuntimeError(str(m.error()))
            out.append(Msg(m.partition(), m.offset(), m.key(), m.value(),
                           tuple(m.headers() or ()), m.timestamp()[1]))
    finally:
        c.close()
    return out


# -- kafka-python -------------------------------------------------------------------

def kafka_python_produce(bootstrap: str, topic: str, records: list[dict[str, Any]],
                         codec: str, acks: str) -> list[Any]:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap,
                      compression_type=None if codec == "none" else codec,
                      acks={"0": 0, "1": 1, "all": "all"}[acks], linger_ms=5,
                      max_request_size=4 * 1024 * 1024)
    futures = [p.send(topic, key=r["key"], value=r["value"], headers=r["headers"],
                      timestamp_ms=r["timestamp"]) for r in records]
    p.flush(30)
    errors = []
    for f in futures:
        try:
            f.get(timeout=30)
        except Exception as exc:  # collected, the test asserts on them
            errors.append(exc)
    p.close(5)
    return errors


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, expected: int,
                         timeout: float = 30) -> list[Msg]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", max_partition_fetch_bytes=2 * 1024 * 1024)
    tps = [KTP(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, msgs in c.poll(500).items():
                for m in msgs:
                    out.append(Msg(m.partition, m.offset, m.key, m.value,
                                   tuple(m.headers or ()), m.timestamp))
    finally:
        c.close()
    return out


# -- aiokafka -----------------------------------------------------------------------

async def _aio_produce(bootstrap: str, topic: str, records: list[dict[str, Any]],
                       codec: str, acks: str) -> list[Any]:
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                         compression_type=None if codec == "none" else codec,
                         acks={"0": 0, "1": 1, "all": "all"}[acks], linger_ms=5,
                         max_request_size=4 * 1024 * 1024)
    await p.start()
    errors = []
    try:
        futs = [await p.send(topic, key=r["key"], value=r["value"], headers=r["headers"],
                             timestamp_ms=r["timestamp"]) for r in records]
        for f in futs:
            try:
                await asyncio.wait_for(f, 30)
            except Exception as exc:
                errors.append(exc)
    finally:
        await p.stop()
    return errors


async def _aio_consume(bootstrap: str, topic: str, partitions: int, expected: int,
                       timeout: float) -> list[Msg]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest",
                         max_partition_fetch_bytes=2 * 1024 * 1024)
    await c.start()
    out: list[Msg] = []
    try:
        tps = [ATP(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500)
            for _, msgs in batch.items():
                for m in msgs:
                    out.append(Msg(m.partition, m.offset, m.key, m.value,
                                   tuple(m.headers or ()), m.timestamp))
    finally:
        await c.stop()
    return out


def aiokafka_produce(*args: Any) -> list[Any]:
    return asyncio.run(_aio_produce(*args))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, expected: int,
                     timeout: float = 30) -> list[Msg]:
    return asyncio.run(_aio_consume(bootstrap, topic, partitions, expected, timeout))


CLIENTS = {
    "confluent": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}


def confluent_consume_to_end(bootstrap: str, topic: str, partitions: int,
                             timeout: float = 60) -> list[Msg]:
    """Everything up to each partition's high watermark, whatever the count."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "enable.auto.commit": False})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)}
    c.close()
    return confluent_consume(bootstrap, topic, partitions, sum(ends.values()), timeout)
