"""The aiokafka source: its admin, producers and consumers, on one event loop. The sasl
source awaits its calls with aio_attempt too."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.fuzz.capture.common import CALL_TIMEOUT, Run, brief

# aiokafka is imported in the functions that use it, as in the single-file capture: `--help`
# and a run of sources that do not use it skip its import (a few tenths of a second).


def aiokafka_workload(run: Run) -> None:
    asyncio.run(_aio_workload(run))


async def aio_attempt(run: Run, label: str, awaitable: Any) -> bool:
    """Await it within CALL_TIMEOUT; False (and the failure noted) when it raised."""
    try:
        await asyncio.wait_for(awaitable, CALL_TIMEOUT)
        return True
    except Exception as exc:
        run.fail(label, brief(exc))
        return False


async def _aio_workload(run: Run) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    topic = "a-events"
    admin = AIOKafkaAdminClient(bootstrap_servers=run.bootstrap, request_timeout_ms=15000)
    await aio_attempt(run, "admin start", admin.start())
    try:
        for label, phase in (("admin topics", _aio_admin_topics(run, admin, topic)),
                             ("produce", _aio_produce(run, run.bootstrap, topic)),
                             ("consume", _aio_consume(run, topic)),
                             ("admin groups", _aio_admin_groups(run, admin, topic))):
            try:
                await phase
            except Exception as exc:  # as Run.attempt: the later phases still run
                run.fail(label, brief(exc))
    finally:
        await aio_attempt(run, "admin close", admin.close())


async def _aio_admin_topics(run: Run, admin: Any, topic: str) -> None:
    from aiokafka.admin import NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    await aio_attempt(run, "create_topics", admin.create_topics(
        [NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"}),
         NewTopic("a-del", 1, 1)]))
    await aio_attempt(run, "create_partitions", admin.create_partitions(
        {topic: NewPartitions(4)}))
    await aio_attempt(run, "describe_configs", admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic),
         ConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True))
    await aio_attempt(run, "alter_configs", admin.alter_configs([ConfigResource(
        ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]))
    await aio_attempt(run, "describe_cluster", admin.describe_cluster())
    await aio_attempt(run, "describe_topics", admin.describe_topics([topic]))
    await aio_attempt(run, "list_topics", admin.list_topics())


async def _aio_produce(run: Run, bootstrap: str, topic: str, **security: Any) -> None:
    from aiokafka import AIOKafkaProducer
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        label = f"AIOKafkaProducer {codec or 'plain'}"
        try:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                        compression_type=codec, linger_ms=5,
                                        max_batch_size=4096, request_timeout_ms=15000,
                                        **security)
        except Exception as exc:
            run.fail(label, brief(exc))
            continue
        if not await aio_attempt(run, f"{label} start", producer.start()):
            await aio_attempt(run, f"{label} stop", producer.stop())
            continue
        try:
            sends = [await producer.send(topic, f"{codec} value {i} ".encode() * 3,
                                         key=f"k{i % 5}".encode() if i % 4 else None,
                                         headers=[("h", b"x")] if i % 3 == 0 else None)
                     for i in range(30)]
            await aio_attempt(run, f"{label} send", asyncio.gather(*sends))
            batch = producer.create_batch()
            for i in range(5):
                batch.append(key=None, value=f"batched {i}".encode(), timestamp=None)
            await aio_attempt(run, f"{label} send_batch",
                               producer.send_batch(batch, topic, partition=1))
        except Exception as exc:
            run.fail(label, brief(exc))
        finally:
            await aio_attempt(run, f"{label} stop", producer.stop())


async def _aio_consume(run: Run, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=run.bootstrap, group_id="a-group",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=6000, heartbeat_interval_ms=1000)
    await aio_attempt(run, "consumer start", consumer.start())
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < 60 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            got += sum(len(records) for records in batches.values())
        if not got:
            run.fail("AIOKafkaConsumer getmany", "no record within 20s")
        await aio_attempt(run, "commit", consumer.commit())
        parts = [TopicPartition(topic, p) for p in range(3)]
        await aio_attempt(run, "committed", consumer.committed(parts[0]))
        await aio_attempt(run, "seek_to_beginning", consumer.seek_to_beginning())
        await aio_attempt(run, "getmany", consumer.getmany(timeout_ms=1000))
        await aio_attempt(run, "seek_to_end", consumer.seek_to_end())
        await aio_attempt(run, "beginning_offsets", consumer.beginning_offsets(parts))
        await aio_attempt(run, "end_offsets", consumer.end_offsets(parts))
        stamp = int(time.time() * 1000) - 60_000
        await aio_attempt(run, "offsets_for_times",
                           consumer.offsets_for_times({tp: stamp for tp in parts}))
        assigned = sorted(consumer.assignment())
        if assigned:
            await aio_attempt(run, "position", consumer.position(assigned[0]))
            await aio_attempt(run, "commit offsets", consumer.commit({assigned[0]: 1}))
    finally:
        await aio_attempt(run, "consumer stop", consumer.stop())


async def _aio_admin_groups(run: Run, admin: Any, topic: str) -> None:
    from aiokafka.admin import RecordsToDelete
    from aiokafka.structs import TopicPartition
    await aio_attempt(run, "list_consumer_groups", admin.list_consumer_groups())
    await aio_attempt(run, "describe_consumer_groups", admin.describe_consumer_groups(
        ["a-group"], include_authorized_operations=True))
    await aio_attempt(run, "list_consumer_group_offsets",
                       admin.list_consumer_group_offsets("a-group"))
    await aio_attempt(run, "delete_records", admin.delete_records(
        {TopicPartition(topic, 0): RecordsToDelete(1)}))
    await aio_attempt(run, "delete_topics", admin.delete_topics(["a-del"]))
