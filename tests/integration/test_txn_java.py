"""Transactions driven by the Java client (Apache Kafka 4.3.1's own jars, tests/integration/java_tools.py).

- Kafka's TransactionalMessageCopier is a consume-transform-produce loop written with the Java
  KafkaProducer: each transaction sends the copies, then `sendOffsetsToTransaction` with the
  consumer's group metadata, then commits; with --enable-random-aborts a third of them abort
  and the consumer rewinds to the committed offsets. The Java console consumer must then read
  every input exactly once with read_committed; the sink's log holds one control marker per
  transaction, so the aborts are counted there (the Java producer drops a batch it has not sent
  yet when the transaction aborts, so an abort need not leave any copy behind).
- A zombie producer (tests/integration/java/Zombie.java, a Java 17 single-file program): a
  second producer with the same transactional.id fences the first, whose commit fails with
  ProducerFencedException; nothing the zombie wrote is visible to read_committed.
"""
from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.harness import BrokerProcess
from tests.integration.java_tools import (  # noqa: F401  (fixtures are used by name)
    QUICK_JVM_OPTS,
    KafkaTools,
    kafka_jars,
    parse_consumed,
)

from .clients import create_topic

pytestmark = pytest.mark.timeout(600)

JAVA_DIR = Path(__file__).resolve().parent / "java"
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
INPUTS = 500
# Small transactions: ~50 of them, a third aborted at random, so the chance that none is
# aborted (and the abort path goes untested) is (2/3)^50, about 2e-9.
TRANSACTION_SIZE = 10
RUN_TIMEOUT_S = 300


@pytest.fixture
def txn_node(broker_factory) -> BrokerProcess:
    # broker_factory: a failed test's report carries this broker's log.
    return broker_factory({
        "transaction.state.log.num.partitions": 5, "offsets.topic.num.partitions": 5,
        "group.initial.rebalance.delay.ms": 0})


def copy_transactionally(tools: KafkaTools, source: str, sink: str, group: str,
                         txn_id: str, *extra: str) -> list[dict]:
    """Run Kafka's TransactionalMessageCopier over partition 0 of ``source`` until it has
    copied what the partition held at its start; its JSON status lines."""
    result = tools.run("run-tool", COPIER, "--broker-list", tools.bootstrap,
                       "--input-topic", source, "--input-partition", "0",
                       "--output-topic", sink, "--consumer-group", group,
                       "--transactional-id", txn_id,
                       "--transaction-size", str(TRANSACTION_SIZE), *extra,
                       timeout=RUN_TIMEOUT_S).ok()
    return [json.loads(line) for line in result.lines if line.startswith("{")]


def produce_inputs(bootstrap: str, topic: str, n: int) -> list[str]:
    values = [f"in-{i}" for i in range(n)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        producer.produce(topic, v.encode(), key=v.encode(), partition=0)
    assert producer.flush(30) == 0
    return values


def sink_end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{topic}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def consumed_values(tools: KafkaTools, topic: str, expect: int, isolation: str) -> list[str]:
    """The Java console consumer: partition 0 of ``topic`` from the start, ``expect`` records
    (it stops at that count, or after 20 s without a record)."""
    result = tools.consume(topic, expect, "--partition", "0", "--offset", "earliest",
                           "--isolation-level", isolation, timeout_ms=20000)
    return [r.value for r in parse_consumed(result)]


def test_java_copier_is_exactly_once_with_random_aborts(txn_node: BrokerProcess,
                                                        kafka_jars: Path) -> None:
    bootstrap = txn_node.bootstrap
    suffix = uuid.uuid4().hex[:6]
    source, sink = f"copy-in-{suffix}", f"copy-out-{suffix}"
    create_topic(bootstrap, source, partitions=1)
    create_topic(bootstrap, sink, partitions=1)
    inputs = produce_inputs(bootstrap, source, INPUTS)
    tools = KafkaTools(bootstrap)

    statuses = copy_transactionally(tools, source, sink, f"copier-{suffix}", f"tx-{suffix}",
                                    "--enable-random-aborts", "--use-group-metadata")
    assert statuses and statuses[-1]["stage"] == "ShutdownComplete", statuses[-3:]
    assert statuses[-1]["totalProcessed"] == INPUTS and statuses[-1]["remaining"] == 0, \
        statuses[-1]

    committed = consumed_values(tools, sink, INPUTS + 1, "read_committed")
    wanted = Counter(inputs)
    assert Counter(committed) == wanted, (f"missing {sorted(wanted - Counter(committed))[:10]}, "
                                          f"extra {sorted(Counter(committed) - wanted)[:10]}")
    # read_uncommitted also returns whatever copies the aborted transactions had sent: repeats
    # of inputs, nothing else. How many there are is the producer's timing, not the broker's.
    everything = consumed_values(tools, sink, 3 * INPUTS, "read_uncommitted")
    aborted = Counter(everything) - wanted
    assert Counter(everything) - aborted == wanted, f"{len(everything)} read uncommitted"
    assert set(aborted) <= set(inputs), sorted(set(aborted) - set(inputs))[:10]
    # Each transaction's sends queue the sink for AddPartitionsToTxn, and the copier waits on
    # sendOffsetsToTransaction (the coordinator's round trips) before it decides to abort: so
    # the sink is in every transaction, which ends with one marker in it. The offsets left
    # over are the commits and the aborts.
    commits = len({s["totalProcessed"] for s in statuses} - {0})
    markers = sink_end_offset(bootstrap, sink) - len(everything)
    assert markers > commits > 0, f"{markers} control markers for {commits} commits"
    # The consumed offsets were committed with the last transaction: a second run copies none.
    again = copy_transactionally(tools, source, sink, f"copier-{suffix}", f"tx-{suffix}")
    assert again[-1]["stage"] == "ShutdownComplete" and again[-1]["totalProcessed"] == 0, \
        again[-3:]


def test_java_zombie_producer_is_fenced(txn_node: BrokerProcess, kafka_jars: Path) -> None:
    bootstrap = txn_node.bootstrap
    topic = f"zombie-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)
    proc = subprocess.run(
        ["java", *QUICK_JVM_OPTS.split(), "-cp", f"{kafka_jars}/*",
         str(JAVA_DIR / "Zombie.java"), bootstrap, topic, f"tx-{topic}"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr[-4000:]
    assert proc.returncode == 0, out
    assert ("zombie fenced: org.apache.kafka.common.errors.ProducerFencedException"
            in proc.stdout), out

    tools = KafkaTools(bootstrap)
    zombie, live = ([f"{who}-{i}" for i in range(10)] for who in ("zombie", "live"))
    # Exact counts, so the console consumer stops at once: the zombie's records sit before the
    # live ones in the log, so any of them read_committed returned would be among the first ten.
    assert consumed_values(tools, topic, 10, "read_committed") == live
    # The zombie's records are in the log, aborted by the fencing initTransactions.
    assert consumed_values(tools, topic, 20, "read_uncommitted") == zombie + live
