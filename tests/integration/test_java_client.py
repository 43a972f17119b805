"""rillet driven by the Java client: Apache Kafka's own CLI tools (4.3.1, Maven Central jars).

Every tool run's exit code and output are checked: 0 and the expected output, or, where the
test asks for something Kafka refuses (an existing topic, a missing one), 1 and the error. Each test gets a fresh rillet node (the
`broker` fixture); RILLET_JAVA_TARGET=kafka runs the same tests against real Apache Kafka.

Tests named test_group_* need the group coordinator (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, OffsetCommit/OffsetFetch, DescribeGroups, ListGroups); `-k "not group"` leaves them out.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

from tests.integration.java_tools import (  # noqa: F401  (fixtures are used by name)
    KafkaTools,
    java_target,
    java_target_with,
    kafka_jars,
    kafka_tools,
    parse_configs,
    parse_consumed,
    parse_consumer_perf,
    parse_group_offsets,
    parse_producer_perf_sent,
    parse_topic_description,
    reference_kafka,
    topic_name,
)
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(600)


# --- kafka-topics -----------------------------------------------------------------------------


def test_topics_create_list_describe_delete(kafka_tools: KafkaTools, topic_name: str) -> None:
    created = kafka_tools.create_topic(topic_name, 3)
    assert f"Created topic {topic_name}." in created.stdout

    listed = kafka_tools.topics("--list").ok()
    assert topic_name in listed.lines

    described = kafka_tools.topics("--describe", "--topic", topic_name).ok()
    description = parse_topic_description(described, topic_name)
    assert description.partition_count == 3
    assert description.replication_factor == 1
    assert [p["Partition"] for p in description.partitions] == ["0", "1", "2"]
    for partition in description.partitions:
        # a single node leads every partition and is its only replica and ISR member
        assert partition["Leader"] == partition["Replicas"] == partition["Isr"] == "1", partition

    kafka_tools.topics("--delete", "--topic", topic_name).ok()
    assert poll_until(lambda: topic_name not in kafka_tools.topics("--list").ok().lines, 20), \
        "deleted topic still listed after 20 s"
    missing = kafka_tools.topics("--describe", "--topic", topic_name)
    assert missing.returncode == 1, missing.describe()
    assert f"Topic '{topic_name}' does not exist" in missing.stdout + missing.stderr


def test_create_existing_topic_is_refused(kafka_tools: KafkaTools, topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 1)
    again = kafka_tools.topics("--create", "--topic", topic_name, "--partitions", "1",
                               "--replication-factor", "1")
    assert again.returncode == 1, again.describe()
    # the client maps error code 36 to TopicExistsException; the text is the broker's message
    assert "TopicExistsException" in again.stderr, again.describe()
    assert "already exists" in again.stdout, again.describe()


def test_topic_config_shown_and_partitions_increased(kafka_tools: KafkaTools,
                                                     topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 2, "--config", "retention.ms=3600000",
                             "--config", "cleanup.policy=delete")
    before = parse_topic_description(
        kafka_tools.topics("--describe", "--topic", topic_name).ok(), topic_name)
    assert before.configs.get("retention.ms") == "3600000", before

    kafka_tools.topics("--alter", "--topic", topic_name, "--partitions", "5").ok()
    after = parse_topic_description(
        kafka_tools.topics("--describe", "--topic", topic_name).ok(), topic_name)
    assert after.partition_count == 5
    assert [p["Partition"] for p in after.partitions] == ["0", "1", "2", "3", "4"]


# --- kafka-configs: DescribeConfigs and IncrementalAlterConfigs ------------------------------

# kafka-configs --describe --all of a topic created with retention.ms=3600000, as Kafka 4.3.1
# answers it (value, then the synonyms: source, broker key, value), for every topic config
# rillet has. Not compared: min.insync.replicas, which Kafka's storage format gives a
# cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG) that rillet has no notion of.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "delete synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}",
    "compression.type": "producer synonyms={DEFAULT_CONFIG:compression.type=producer}",
    "delete.retention.ms":
        "86400000 synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}",
    "file.delete.delay.ms": "60000 synonyms={DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
    "flush.messages": "9223372036854775807 synonyms="
                      "{DEFAULT_CONFIG:log.flush.interval.messages=9223372036854775807}",
    "flush.ms": "9223372036854775807 synonyms={}",
    "index.interval.bytes": "4096 synonyms={DEFAULT_CONFIG:log.index.interval.bytes=4096}",
    "max.compaction.lag.ms": "9223372036854775807 synonyms="
                             "{DEFAULT_CONFIG:log.cleaner.max.compaction.lag.ms="
                             "9223372036854775807}",
    "max.message.bytes": "1048588 synonyms={DEFAULT_CONFIG:message.max.bytes=1048588}",
    "message.timestamp.type":
        "CreateTime synonyms={DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}",
    "min.cleanable.dirty.ratio":
        "0.5 synonyms={DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}",
    "min.compaction.lag.ms": "0 synonyms={DEFAULT_CONFIG:log.cleaner.min.compaction.lag.ms=0}",
    "retention.bytes": "-1 synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}",
    "retention.ms": "3600000 synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}",
    "segment.bytes": "1073741824 synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    "segment.index.bytes":
        "10485760 synonyms={DEFAULT_CONFIG:log.index.size.max.bytes=10485760}",
    "segment.ms": "604800000 synonyms={}",
    "unclean.leader.election.enable":
        "false synonyms={DEFAULT_CONFIG:unclean.leader.election.enable=false}",
}


def test_configs_describe_topic_as_kafka_does(kafka_tools: KafkaTools, topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 1, "--config", "retention.ms=3600000")
    described = kafka_tools.topic_configs(topic_name, "--all")
    assert {k: described.get(k) for k in KAFKA_TOPIC_CONFIGS} == KAFKA_TOPIC_CONFIGS
    # without --all: only what is set on the topic itself
    assert kafka_tools.topic_configs(topic_name) == {
        "retention.ms": "3600000 synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}"}


def test_configs_alter_and_delete_a_topic_config(kafka_tools: KafkaTools,
                                                 topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 1)
    entity = ("--entity-type", "topics", "--entity-name", topic_name)
    kafka_tools.configs("--alter", *entity, "--add-config", "retention.bytes=1000000").ok()
    assert kafka_tools.topic_configs(topic_name) == {
        "retention.bytes": "1000000 synonyms={DYNAMIC_TOPIC_CONFIG:retention.bytes=1000000, "
                           "DEFAULT_CONFIG:log.retention.bytes=-1}"}
    kafka_tools.configs("--alter", *entity, "--delete-config", "retention.bytes").ok()
    assert kafka_tools.topic_configs(topic_name) == {}
    refused = kafka_tools.configs("--alter", *entity, "--add-config", "retention.ms=banana")
    assert refused.returncode != 0, refused.describe()
    assert "retention.ms" in refused.stdout + refused.stderr, refused.describe()


# Static broker settings (server.properties) and what Kafka 4.3.1 then reports for a topic
# without overrides: a synonym listed before the key Kafka prefers is dropped (retention.ms
# shows none, log.retention.minutes is not log.retention.ms), one after it is kept.
STATIC_SETTINGS = {"log.retention.minutes": "300", "log.roll.ms": "3600000",
                   "log.flush.interval.ms": "1000", "log.segment.delete.delay.ms": "30000",
                   "log.retention.bytes": "5000000"}
KAFKA_TOPIC_CONFIGS_UNDER_STATIC = {
    "retention.ms": "18000000 synonyms={}",
    "segment.ms": "3600000 synonyms={STATIC_BROKER_CONFIG:log.roll.ms=3600000, "
                  "DEFAULT_CONFIG:log.roll.hours=168}",
    "flush.ms": "1000 synonyms={STATIC_BROKER_CONFIG:log.flush.interval.ms=1000, "
                "DEFAULT_CONFIG:log.flush.scheduler.interval.ms=9223372036854775807}",
    "retention.bytes": "5000000 synonyms={STATIC_BROKER_CONFIG:log.retention.bytes=5000000, "
                       "DEFAULT_CONFIG:log.retention.bytes=-1}",
    "file.delete.delay.ms": "30000 synonyms={STATIC_BROKER_CONFIG:log.segment.delete.delay.ms"
                            "=30000, DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
    "segment.bytes": "1073741824 synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
}


def test_configs_describe_synonyms_of_static_broker_settings(java_target_with,
                                                             topic_name: str) -> None:
    tools = java_target_with(STATIC_SETTINGS)
    tools.create_topic(topic_name, 1)
    described = tools.topic_configs(topic_name, "--all")
    assert {k: described.get(k) for k in KAFKA_TOPIC_CONFIGS_UNDER_STATIC} == \
        KAFKA_TOPIC_CONFIGS_UNDER_STATIC
    broker = parse_configs(tools.configs("--describe", "--all", "--entity-type", "brokers",
                                         "--entity-name", "1").ok())
    assert broker["log.retention.minutes"] == (
        "300 synonyms={STATIC_BROKER_CONFIG:log.retention.minutes=300, "
        "DEFAULT_CONFIG:log.retention.hours=168}")
    assert broker["log.retention.ms"] == "null synonyms={}"
    assert broker["log.retention.hours"] == "168 synonyms={DEFAULT_CONFIG:log.retention.hours=168}"


# --- console producer -> console consumer (assigned partitions, no group) -------------------


def test_console_round_trip_with_keys(kafka_tools: KafkaTools, topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 1)
    sent = [(f"key-{i % 7}", f"value-{i}") for i in range(100)]
    kafka_tools.produce_lines(topic_name, [f"{k}:{v}" for k, v in sent]).ok()

    consumed = parse_consumed(kafka_tools.consume(
        topic_name, len(sent), "--partition", "0", "--offset", "earliest").ok())
    assert [(r.key, r.value) for r in consumed] == sent
    assert [r.offset for r in consumed] == list(range(len(sent)))


def test_console_keys_stay_in_one_partition_in_order(kafka_tools: KafkaTools,
                                                     topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 3)
    sent = [(f"user-{i % 6}", f"event-{i}") for i in range(60)]
    kafka_tools.produce_lines(topic_name, [f"{k}:{v}" for k, v in sent]).ok()
    end_offsets = kafka_tools.end_offsets(topic_name)
    assert sum(end_offsets.values()) == len(sent), end_offsets

    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    values_of_key: dict[str, list[str]] = defaultdict(list)
    for partition, end in end_offsets.items():
        if end == 0:
            continue
        records = parse_consumed(kafka_tools.consume(
            topic_name, end, "--partition", str(partition), "--offset", "earliest").ok())
        assert [r.offset for r in records] == list(range(end))
        for r in records:
            partitions_of_key[r.key].add(r.partition)
            values_of_key[r.key].append(r.value)
    for key in {k for k, _ in sent}:
        assert len(partitions_of_key[key]) == 1, (key, partitions_of_key[key])
        assert values_of_key[key] == [v for k, v in sent if k == key]


def test_console_consumer_offset_and_empty_tail(kafka_tools: KafkaTools, topic_name: str) -> None:
    """--offset N starts mid-log; reading past the end ends by timeout with what exists."""
    kafka_tools.create_topic(topic_name, 1)
    kafka_tools.produce_lines(topic_name, [f"k:v{i}" for i in range(10)]).ok()
    # --timeout-ms firing before --max-messages is a normal end: exit 0 (plus an ERROR log line)
    # The timeout bounds each poll, the first (metadata, offsets, fetch) included.
    result = kafka_tools.consume(topic_name, 20, "--partition", "0", "--offset", "6",
                                 timeout_ms=10000).ok()
    assert "Processed a total of 4 messages" in result.stderr, result.describe()
    assert [r.value for r in parse_consumed(result)] == ["v6", "v7", "v8", "v9"]


# --- consumer groups ------------------------------------------------------------------------


def test_group_describe_shows_offsets_and_lag(kafka_tools: KafkaTools, topic_name: str) -> None:
    group = f"{topic_name}-g"
    kafka_tools.create_topic(topic_name, 2)
    kafka_tools.produce_lines(topic_name, [f"k{i}:v{i}" for i in range(30)]).ok()
    end_offsets = kafka_tools.end_offsets(topic_name)

    consumed = kafka_tools.consume(topic_name, 30, "--group", group, "--from-beginning").ok()
    assert len(parse_consumed(consumed)) == 30

    assert group in kafka_tools.consumer_groups("--list").ok().lines
    rows = parse_group_offsets(
        kafka_tools.consumer_groups("--describe", "--group", group).ok(), group)
    assert set(rows) == {(topic_name, p) for p in end_offsets}
    for (_, partition), row in rows.items():
        assert row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] == str(end_offsets[partition]), row
        assert row["LAG"] == "0", row

    kafka_tools.produce_lines(topic_name, [f"k{i}:more{i}" for i in range(10)]).ok()
    rows = parse_group_offsets(
        kafka_tools.consumer_groups("--describe", "--group", group).ok(), group)
    assert sum(int(row["LAG"]) for row in rows.values()) == 10, rows


def test_group_resumes_from_committed_offset(kafka_tools: KafkaTools, topic_name: str) -> None:
    group = f"{topic_name}-g"
    kafka_tools.create_topic(topic_name, 1)
    kafka_tools.produce_lines(topic_name, [f"k:v{i}" for i in range(20)]).ok()
    # one record per poll, so the position committed on close is exactly what was printed
    one_per_poll = ("--command-property", "max.poll.records=1")
    first = parse_consumed(kafka_tools.consume(topic_name, 8, "--group", group,
                                               "--from-beginning", *one_per_poll).ok())
    second = parse_consumed(kafka_tools.consume(topic_name, 12, "--group", group,
                                                *one_per_poll).ok())
    assert [r.value for r in first] == [f"v{i}" for i in range(8)]
    assert [r.value for r in second] == [f"v{i}" for i in range(8, 20)]


def test_group_reset_offsets_to_earliest(kafka_tools: KafkaTools, topic_name: str) -> None:
    group = f"{topic_name}-g"
    kafka_tools.create_topic(topic_name, 1)
    kafka_tools.produce_lines(topic_name, [f"k:v{i}" for i in range(12)]).ok()
    kafka_tools.consume(topic_name, 12, "--group", group, "--from-beginning").ok()

    kafka_tools.consumer_groups("--reset-offsets", "--group", group, "--topic", topic_name,
                                "--to-earliest", "--execute").ok()
    rows = parse_group_offsets(
        kafka_tools.consumer_groups("--describe", "--group", group).ok(), group)
    assert rows[(topic_name, 0)]["CURRENT-OFFSET"] == "0", rows
    assert rows[(topic_name, 0)]["LAG"] == "12", rows
    again = parse_consumed(kafka_tools.consume(topic_name, 12, "--group", group).ok())
    assert [r.value for r in again] == [f"v{i}" for i in range(12)]


# --- perf tools ---------------------------------------------------------------------------


PERF_RECORDS = 20_000


def test_producer_perf_acks_all_idempotent(kafka_tools: KafkaTools, topic_name: str) -> None:
    """The Java producer's defaults (acks=all, idempotence on): every record lands exactly once."""
    kafka_tools.create_topic(topic_name, 3)
    result = kafka_tools.run(
        "kafka-producer-perf-test", "--bootstrap-server", kafka_tools.bootstrap,
        "--topic", topic_name, "--num-records", str(PERF_RECORDS), "--record-size", "1024",
        "--throughput", "-1",
        "--command-property", "acks=all", "--command-property", "enable.idempotence=true",
        timeout=300).ok()
    assert parse_producer_perf_sent(result) == PERF_RECORDS
    assert "ERROR" not in result.stderr and "Exception" not in result.stderr, result.describe()
    assert sum(kafka_tools.end_offsets(topic_name).values()) == PERF_RECORDS


def test_group_consumer_perf_reads_everything(kafka_tools: KafkaTools, topic_name: str) -> None:
    kafka_tools.create_topic(topic_name, 3)
    kafka_tools.run("kafka-producer-perf-test", "--bootstrap-server", kafka_tools.bootstrap,
                    "--topic", topic_name, "--num-records", str(PERF_RECORDS),
                    "--record-size", "1024", "--throughput", "-1", timeout=300).ok()
    result = kafka_tools.run("kafka-consumer-perf-test", "--bootstrap-server",
                             kafka_tools.bootstrap, "--topic", topic_name,
                             "--num-records", str(PERF_RECORDS), "--timeout", "30000",
                             timeout=300).ok()
    stats = parse_consumer_perf(result)
    assert int(stats["data.consumed.in.nMsg"]) == PERF_RECORDS, stats
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(PERF_RECORDS * 1024 / 2**20,
                                                                rel=1e-3)
