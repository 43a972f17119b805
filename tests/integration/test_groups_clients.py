"""Group consumers of kafka-python and aiokafka: sharing, auto and manual commit, resume."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.harness import BrokerProcess
from tests.polling import poll_until

from .clients import create_topic

pytestmark = pytest.mark.timeout(180)

SESSION_MS = 6000


@pytest.fixture
def gbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config={"group.initial.rebalance.delay.ms": 300})


def produce(bs: str, topic: str, values: list[str], partitions: int) -> None:
    p = KafkaProducer(bootstrap_servers=bs)
    for i, v in enumerate(values):
        p.send(topic, v.encode(), partition=i % partitions)
    p.flush(30)
    p.close()


def kp_consumer(bs: str, group: str, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                         session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                         consumer_timeout_ms=200, **extra)


def drain(consumer: KafkaConsumer, want: int, timeout: float) -> list[str]:
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        for m in consumer:
            out.append(m.value.decode())
    return out


def test_kafka_python_group_shares_partitions_and_reads_everything(
        gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "kp-shared", 4)
    got: dict[int, list[str]] = {0: [], 1: []}
    parts: dict[int, frozenset[int]] = {0: frozenset(), 1: frozenset()}
    failures: list[BaseException] = []
    stop = threading.Event()

    # Each consumer polls all the time, as an application does: a member that stops
    # polling cannot rejoin, and kafka-python 3.0.12 rejoins once more after a poll
    # timed out mid-join (a leader's rejoin starts a new generation, as in Kafka).
    def run(i: int) -> None:
        try:
            c = kp_consumer(bs, "kp-group")
            c.subscribe(["kp-shared"])
            while not stop.is_set():
                for batch in c.poll(200).values():
                    got[i].extend(m.value.decode() for m in batch)
                parts[i] = frozenset(tp.partition for tp in c.assignment())
            c.close()
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    def shared() -> bool:
        return len(parts[0]) == 2 and len(parts[1]) == 2 and parts[0] | parts[1] == {0, 1, 2, 3}

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    try:
        poll_until(lambda: shared() or bool(failures), 60)
        assert not failures
        assert shared(), f"assignments never shared the partitions: {parts}"
        values = [f"k{i}" for i in range(200)]
        produce(bs, "kp-shared", values, 4)
        # The equality below says what is missing, so the wait itself asserts nothing.
        poll_until(lambda: len(got[0]) + len(got[1]) >= 200 or bool(failures), 30)
        assert not failures
        assert sorted(got[0] + got[1]) == sorted(values)
        assert got[0] and got[1], "one consumer read everything"
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def test_kafka_python_manual_and_auto_commit_resume(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "kp-commit", 2)
    produce(bs, "kp-commit", [f"a{i}" for i in range(20)], 2)
    # Manual commit of explicit offsets with metadata.
    c = kp_consumer(bs, "kp-manual", enable_auto_commit=False)
    c.subscribe(["kp-commit"])
    assert len(drain(c, 20, 30)) == 20
    c.commit({TopicPartition("kp-commit", 0): OffsetAndMetadata(7, "note", -1),
              TopicPartition("kp-commit", 1): OffsetAndMetadata(10, "", -1)})
    assert c.committed(TopicPartition("kp-commit", 0)) == 7
    c.close()
    resumed = kp_consumer(bs, "kp-manual", enable_auto_commit=False)
    resumed.subscribe(["kp-commit"])
    # Partition 0 resumes at 7 (3 left), partition 1 at 10 (none left).
    assert sorted(drain(resumed, 3, 30)) == sorted(f"a{i}" for i in (14, 16, 18))
    resumed.close()
    # Auto commit: offsets are committed on close.
    auto = kp_consumer(bs, "kp-auto", enable_auto_commit=True, auto_commit_interval_ms=200)
    auto.subscribe(["kp-commit"])
    assert len(drain(auto, 20, 30)) == 20
    auto.close()
    produce(bs, "kp-commit", ["late"], 2)
    again = kp_consumer(bs, "kp-auto")
    again.subscribe(["kp-commit"])
    assert drain(again, 1, 30) == ["late"]
    again.close()


def test_aiokafka_group_consumers(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap

    async def send(values: list[tuple[int, str]]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs)
        await producer.start()
        try:
            for partition, v in values:
                await producer.send_and_wait("aio", v.encode(), partition=partition)
        finally:
            await producer.stop()

    def member(group: str, auto: bool) -> AIOKafkaConsumer:
        return AIOKafkaConsumer("aio", bootstrap_servers=bs, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=auto,
                                auto_commit_interval_ms=200, session_timeout_ms=SESSION_MS,
                                heartbeat_interval_ms=500)

    async def read(c: AIOKafkaConsumer, want: int) -> list[str]:
        out: list[str] = []
        async with asyncio.timeout(30):
            while len(out) < want:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    out.extend(m.value.decode() for m in msgs)
        return out

    async def scenario() -> None:
        create_topic(bs, "aio", 2)
        # Two members of one group split the partitions, then read 20 messages each.
        pair = [member("aio-pair", True), member("aio-pair", True)]
        for c in pair:
            await c.start()
        try:
            async with asyncio.timeout(30):
                while any(len(c.assignment()) != 1 for c in pair):
                    await asyncio.gather(*(c.getmany(timeout_ms=100) for c in pair))
            assert pair[0].assignment() | pair[1].assignment() == {AioTP("aio", 0),
                                                                    AioTP("aio", 1)}
            await send([(i % 2, f"v{i}") for i in range(40)])
            got = await asyncio.gather(*(read(c, 20) for c in pair))
            assert sorted(got[0] + got[1]) == sorted(f"v{i}" for i in range(40))
        finally:
            for c in pair:
                await c.stop()
        # Manual commit; a new consumer of the group starts after the committed offsets.
        first = member("aio-manual", False)
        await first.start()
        try:
            assert len(await read(first, 40)) == 40
            await first.commit()
        finally:
            await first.stop()
        await send([(1, "after")])
        second = member("aio-manual", False)
        await second.start()
        try:
            assert await read(second, 1) == ["after"]
            await second.commit()
            assert await second.committed(AioTP("aio", 0)) == 20
            assert await second.committed(AioTP("aio", 1)) == 21
        finally:
            await second.stop()

    asyncio.run(scenario())
