"""The admin client's topic calls the operator's Topic handling uses, against a real broker:
describe (id, replicas, ISR), config overrides, add partitions, incremental config changes,
delete."""
from __future__ import annotations

import asyncio

import pytest

from rillet.client import AdminClient
from rillet.protocol.errors import KafkaError
from tests.harness import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def test_topic_lifecycle_through_admin_client(broker: BrokerProcess) -> None:
    async def go() -> None:
        async with AdminClient(broker.bootstrap) as admin:
            assert await admin.describe_topic("orders") is None
            await admin.create_topic("orders", 2, 1, {"retention.ms": "60000"})
            t = await admin.describe_topic("orders")
            assert t is not None and t.name == "orders"
            assert len(t.topic_id) == 36 and t.topic_id != "00000000-0000-0000-0000-000000000000"
            assert sorted(t.replicas) == [0, 1]
            assert all(len(r) == 1 for r in t.replicas.values())
            assert t.isr == t.replicas
            assert await admin.topic_config_overrides("orders") == {"retention.ms": "60000"}

            await admin.create_partitions("orders", 5)
            t2 = await admin.describe_topic("orders")
            assert sorted(t2.replicas) == [0, 1, 2, 3, 4] and t2.topic_id == t.topic_id
            with pytest.raises(KafkaError):   # a decrease is refused by the broker too
                await admin.create_partitions("orders", 3)

            await admin.alter_topic_configs("orders", {"cleanup.policy": "compact"},
                                            ["retention.ms"])
            assert await admin.topic_config_overrides("orders") == {"cleanup.policy": "compact"}

            assert await admin.delete_topic("orders") is True
            assert await admin.describe_topic("orders") is None
            assert await admin.delete_topic("orders") is False
    asyncio.run(go())
