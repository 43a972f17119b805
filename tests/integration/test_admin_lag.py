"""Consumer-group lag through rillet's admin client (DescribeGroups + OffsetFetch + ListOffsets)."""
from __future__ import annotations

import asyncio
import re
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rillet.client import AdminClient, PartitionLag
from tests.harness import BrokerProcess, free_port
from tests.polling import wait_until

from .clients import create_topic

pytestmark = pytest.mark.timeout(120)


def produce(bs: str, topic: str, per_partition: dict[int, int]) -> None:
    p = Producer({"bootstrap.servers": bs})
    for partition, n in per_partition.items():
        for i in range(n):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def lag(bs: str, group: str) -> list[PartitionLag]:
    async def go() -> list[PartitionLag]:
        async with AdminClient(bs) as admin:
            return await admin.describe_group_lag(group)
    return asyncio.run(go())


def test_lag_per_partition_for_committed_and_live_group(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(config={"group.initial.rebalance.delay.ms": 0})
    bs = broker.bootstrap
    create_topic(bs, "lagged", 3)
    produce(bs, "lagged", {0: 10, 1: 20, 2: 5})

    # A stand-alone commit (admin style): offsets 4 and 20 for partitions 0 and 1.
    c = Consumer({"bootstrap.servers": bs, "group.id": "lag-g", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("lagged", 0, 4), TopicPartition("lagged", 1, 20)],
             asynchronous=False)
    c.close()
    rows = lag(bs, "lag-g")
    assert [(r.topic, r.partition, r.committed_offset, r.end_offset, r.lag, r.member_id)
            for r in rows] == [("lagged", 0, 4, 10, 6, None), ("lagged", 1, 20, 20, 0, None)]

    # A live member that owns all partitions: every partition is listed with its owner;
    # partition 2 has no commit yet, so no lag number (Kafka's "-").
    live = Consumer({"bootstrap.servers": bs, "group.id": "lag-g", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "client.id": "lag-client"})
    live.subscribe(["lagged"])
    try:
        def owns_all() -> bool:
            live.poll(0.2)  # the consumer joins and is assigned only while polled
            return len(live.assignment()) == 3
        wait_until(owns_all, 30, "the live member to be assigned all 3 partitions", interval=0)
        rows = lag(bs, "lag-g")
        assert [(r.partition, r.committed_offset, r.end_offset, r.lag) for r in rows] == \
               [(0, 4, 10, 6), (1, 20, 20, 0), (2, -1, 5, None)]
        assert {r.client_id for r in rows} == {"lag-client"} and all(r.member_id for r in rows)
        produce(bs, "lagged", {1: 7})
        live.commit(offsets=[TopicPartition("lagged", 2, 5)], asynchronous=False)
        rows = lag(bs, "lag-g")
        assert [(r.partition, r.lag) for r in rows] == [(0, 6), (1, 7), (2, 0)]
    finally:
        live.close()


def test_groups_cli_lists_and_describes_lag(broker_factory: Callable[..., BrokerProcess]
                                            ) -> None:
    import subprocess
    import sys
    broker = broker_factory(config={"group.initial.rebalance.delay.ms": 0})
    bs = broker.bootstrap
    create_topic(bs, "cli-lag", 2)
    produce(bs, "cli-lag", {0: 6, 1: 3})
    c = Consumer({"bootstrap.servers": bs, "group.id": "cli-g", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("cli-lag", 0, 2)], asynchronous=False)
    c.close()

    def run(*args: str, bootstrap: str = bs) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rillet.client.groups_cli",
                               "--bootstrap-server", bootstrap, *args],
                              capture_output=True, text=True, timeout=60)

    def cli(*args: str) -> list[str]:
        out = run(*args)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    assert cli("--list", "--state") == ["cli-g\tEmpty"]
    lines = cli("--describe", "--group", "cli-g")
    assert lines[0] == "Consumer group 'cli-g' is Empty with 0 member(s)."
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[2].split() == ["cli-g", "cli-lag", "0", "2", "6", "4", "-", "-", "-"]
    assert len(lines) == 3

    # Absence is not presence (issue 32): Kafka's line for an unknown group, exit 1; a
    # request that fails (nothing listens) exits 2.
    missing = run("--describe", "--group", "nosuch")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.strip() == "Error: Consumer group 'nosuch' does not exist."
    unreachable = run("--list", bootstrap=f"127.0.0.1:{free_port()}")
    assert unreachable.returncode == 2 and "rillet-groups:" in unreachable.stderr

    # The first group use made this broker leader of all 50 __consumer_offsets partitions:
    # one INFO line says so, none per partition (issue 32).
    log = broker.log_path.read_text()
    assert "INFO rillet.replication.manager: leader of 50 partitions: __consumer_offsets " \
           "[0-49] (epoch 0)" in log
    assert not re.search(r"__consumer_offsets-\d+: leader in epoch", log)
