"""Each real client library: produce with every codec and acks level, read it all back."""
from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.harness import BrokerProcess

from .clients import CLIENTS, CODECS, Msg, create_topic, make_records


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("clients") / "data").start()
    yield b
    b.stop()


def _check_round_trip(records: list[dict], got: list[Msg]) -> None:
    assert len(got) == len(records), f"expected {len(records)} records, got {len(got)}"
    by_seq = {int(dict(m.headers)["seq"]): m for m in got}
    assert sorted(by_seq) == list(range(len(records))), "duplicates or gaps"
    key_partition: dict[bytes, int] = {}
    for i, r in enumerate(records):
        m = by_seq[i]
        assert (m.key, m.value, m.timestamp) == (r["key"], r["value"], r["timestamp"])
        assert dict(m.headers) == {"seq": str(i).encode(), "empty": b""}
        assert key_partition.setdefault(m.key, m.partition) == m.partition
    per_partition: dict[int, list[Msg]] = defaultdict(list)
    for m in sorted(got, key=lambda m: (m.partition, m.offset)):
        per_partition[m.partition].append(m)
    for msgs in per_partition.values():
        assert [m.offset for m in msgs] == list(range(len(msgs))), "offsets not dense"
        seqs = [int(dict(m.headers)["seq"]) for m in msgs]
        assert seqs == sorted(seqs), "order within a partition not kept"


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_round_trip(shared_broker: BrokerProcess, client: str, codec: str, acks: str) -> None:
    produce, consume = CLIENTS[client]
    topic = f"rt-{client}-{codec}-{acks}-{uuid.uuid4().hex[:6]}"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    records = make_records(120, base_ts=int(time.time() * 1000) - 10_000)
    assert produce(shared_broker.bootstrap, topic, records, codec, acks) == []
    got = consume(shared_broker.bootstrap, topic, 3, len(records))
    _check_round_trip(records, got)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_one_megabyte_records(shared_broker: BrokerProcess, client: str) -> None:
    produce, consume = CLIENTS[client]
    topic = f"big-{client}-{uuid.uuid4().hex[:6]}"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    records = make_records(3, base_ts=int(time.time() * 1000), value_size=1_000_000)
    for r in records:
        r["value"] = r["value"][:1_000_000]
    extra = (shared_broker.bootstrap, topic, records, "none", "1")
    if client == "confluent":
        errors = produce(*extra, extra={"message.max.bytes": 4_000_000})
    else:
        errors = produce(*extra)
    assert errors == []
    got = consume(shared_broker.bootstrap, topic, 1, 3)
    assert [len(m.value) for m in got] == [1_000_000] * 3


def test_message_max_bytes_is_enforced(shared_broker: BrokerProcess) -> None:
    topic = f"limit-{uuid.uuid4().hex[:6]}"
    create_topic(shared_broker.bootstrap, topic, partitions=1,
                 config={"max.message.bytes": "100000"})
    errors: list = []
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "message.max.bytes": 4_000_000,
                  "retries": 0, "acks": "1"})
    p.produce(topic, value=b"x" * 200_000,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)  # separate batches: the limit applies per batch
    p.produce(topic, value=b"small", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    codes = [e.code() if e else None for e in errors]
    assert codes == [KafkaError.MSG_SIZE_TOO_LARGE, None]


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_offsets_for_times(shared_broker: BrokerProcess, client: str) -> None:
    topic = f"times-{client}-{uuid.uuid4().hex[:6]}"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    base = int(time.time() * 1000) - 100_000
    records = make_records(50, base_ts=base)
    for i, r in enumerate(records):
        r["timestamp"] = base + i * 1000
    produce, _ = CLIENTS["confluent"]
    assert produce(shared_broker.bootstrap, topic, records, "lz4", "1") == []
    target = base + 20_500  # between record 20 and 21: the answer is 21
    if client == "confluent":
        c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "x"})
        res = c.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
        past = c.offsets_for_times([TopicPartition(topic, 0, base + 10**7)], timeout=10)
        c.close()
        assert res[0].offset == 21 and past[0].offset == -1
    elif client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP
        c = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap)
        res = c.offsets_for_times({KTP(topic, 0): target})
        c.close()
        assert res[KTP(topic, 0)].offset == 21
        assert res[KTP(topic, 0)].timestamp == base + 21_000
    else:
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def lookup():
            c = AIOKafkaConsumer(bootstrap_servers=shared_broker.bootstrap)
            await c.start()
            try:
                return await c.offsets_for_times({ATP(topic, 0): target})
            finally:
                await c.stop()
        res = asyncio.run(lookup())
        assert res[ATP(topic, 0)].offset == 21
