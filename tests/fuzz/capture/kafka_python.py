"""The kafka-python source: its admin, producers and consumers."""
from __future__ import annotations

import time
from typing import Any

from tests.fuzz.capture.common import CALL_TIMEOUT, Run, gather

# kafka (kafka-python) is imported in the functions that use it, as in the single-file
# capture: `--help` and a run of sources that do not use it skip its import (about 0.5 s).


def kafka_python_workload(run: Run) -> None:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=run.bootstrap, request_timeout_ms=15000)
    topic = "p-events"
    try:
        run.attempt("admin topics", _kp_admin_topics, run, admin, topic)
        run.attempt("admin security", _kp_admin_security, run, admin, topic)
        run.attempt("produce", _kp_produce, run, topic)
        run.attempt("consume", _kp_consume, run, topic)
        run.attempt("admin groups", _kp_admin_groups, run, admin, topic)
    finally:
        admin.close()


def _kp_admin_topics(run: Run, admin: Any, topic: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    run.attempt("create_topics", admin.create_topics, [
        NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"}),
        NewTopic("p-del", 1, 1), NewTopic("p-assigned", replica_assignments={0: [1], 1: [1]})])
    run.attempt("create_topics validate_only", admin.create_topics,
                [NewTopic("p-checked", 1, 1)], validate_only=True)
    run.attempt("create_partitions", admin.create_partitions, {topic: NewPartitions(4)})
    run.attempt("describe_configs", admin.describe_configs, [
        ConfigResource(ConfigResourceType.TOPIC, topic),
        ConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True)
    run.attempt("alter_configs", admin.alter_configs, [ConfigResource(
        ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})],
        incremental=False)
    run.attempt("alter_configs incremental", admin.alter_configs, [ConfigResource(
        ConfigResourceType.TOPIC, topic, configs={"segment.bytes": "1048576",
                                                  "max.message.bytes": ("DELETE", None)})],
        incremental=True, raise_on_unknown=False)
    for label in ("describe_cluster", "describe_topics", "list_topics", "api_versions",
                  "describe_features", "describe_metadata_quorum", "describe_log_dirs",
                  "list_partition_reassignments"):
        run.attempt(label, getattr(admin, label))


def _kp_admin_security(run: Run, admin: Any, topic: str) -> None:
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                             ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
                             ResourceType, ScramMechanism, UserScramCredentialDeletion,
                             UserScramCredentialUpsertion)
    run.attempt("create_acls", admin.create_acls, [
        ACL("User:pia", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, topic)),
        ACL("User:pia", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
            ResourcePattern(ResourceType.TOPIC, "p-", ACLResourcePatternType.PREFIXED))])
    everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.ANY, None,
                                                 ACLResourcePatternType.ANY))
    run.attempt("describe_acls", admin.describe_acls, everything)
    run.attempt("delete_acls", admin.delete_acls, [everything])
    run.attempt("alter_user_scram_credentials", admin.alter_user_scram_credentials, [
        UserScramCredentialUpsertion("pia", ScramMechanism.SCRAM_SHA_256, "pia-secret"),
        UserScramCredentialUpsertion("pia", ScramMechanism.SCRAM_SHA_512, "pia-secret",
                                     iterations=8192)])
    run.attempt("describe_user_scram_credentials", admin.describe_user_scram_credentials)
    run.attempt("describe_user_scram_credentials pia", admin.describe_user_scram_credentials,
                ["pia"])
    run.attempt("alter_user_scram_credentials delete", admin.alter_user_scram_credentials,
                [UserScramCredentialDeletion("pia", ScramMechanism.SCRAM_SHA_512)])


def _kp_produce(run: Run, topic: str) -> None:
    from kafka import KafkaProducer
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        label = f"KafkaProducer {codec or 'plain'}"
        producer = run.attempt(label, KafkaProducer, bootstrap_servers=run.bootstrap,
                               acks="all", enable_idempotence=True, compression_type=codec,
                               linger_ms=5, batch_size=4096, request_timeout_ms=15000)
        if producer is None:
            continue
        try:
            futures = [producer.send(topic, value=f"{codec} value {i} ".encode() * 3,
                                     key=f"k{i % 5}".encode() if i % 4 else None,
                                     headers=[("h", b"x")] if i % 3 == 0 else None)
                       for i in range(40)]
            run.attempt(f"{label} flush", producer.flush, CALL_TIMEOUT)
            for future in futures[-1:]:
                run.attempt(f"{label} send", future.get, CALL_TIMEOUT)
        finally:
            producer.close(timeout=5)
    plain = KafkaProducer(bootstrap_servers=run.bootstrap, acks=1, linger_ms=5)
    try:
        for i in range(10):
            plain.send(topic, f"acks=1 value {i}".encode(), partition=i % 3)
        run.attempt("KafkaProducer acks=1 flush", plain.flush, CALL_TIMEOUT)
    finally:
        plain.close(timeout=5)


def _kp_consume(run: Run, topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(topic, bootstrap_servers=run.bootstrap, group_id="p-group",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        got = _kp_poll(consumer, 60, 20.0)
        if not got:
            run.fail("KafkaConsumer poll", "no record within 20s")
        run.attempt("commit", consumer.commit)
        parts = [TopicPartition(topic, p) for p in range(3)]
        run.attempt("committed", consumer.committed, parts[0])
        run.attempt("beginning_offsets", consumer.beginning_offsets, parts)
        run.attempt("end_offsets", consumer.end_offsets, parts)
        stamp = int(time.time() * 1000) - 60_000
        run.attempt("offsets_for_times", consumer.offsets_for_times,
                    {tp: stamp for tp in parts})
        assigned = list(consumer.assignment())
        if assigned:
            run.attempt("seek_to_beginning", consumer.seek_to_beginning, *assigned)
            _kp_poll(consumer, 5, 3.0)
            run.attempt("seek", consumer.seek, assigned[0], 1)
            run.attempt("position", consumer.position, assigned[0])
            run.attempt("seek_to_end", consumer.seek_to_end)
            run.attempt("commit again", consumer.commit)
    finally:
        consumer.close()
    manual = KafkaConsumer(bootstrap_servers=run.bootstrap, group_id="p-manual",
                           auto_offset_reset="earliest", enable_auto_commit=False,
                           isolation_level="read_committed")
    try:
        manual.assign([TopicPartition(topic, 1)])
        _kp_poll(manual, 10, 6.0)
        run.attempt("commit assigned", manual.commit)
    finally:
        manual.close()


def _kp_poll(consumer: Any, want: int, seconds: float) -> list[Any]:
    return gather(lambda: [record for records in consumer.poll(timeout_ms=500).values()
                           for record in records], want, seconds)


def _kp_admin_groups(run: Run, admin: Any, topic: str) -> None:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.structs import OffsetAndMetadata
    tp = TopicPartition(topic, 0)
    run.attempt("list_groups", admin.list_groups)
    run.attempt("describe_groups", admin.describe_groups, ["p-group", "p-manual"],
                include_authorized_operations=True)
    run.attempt("list_group_offsets", admin.list_group_offsets, {"p-group": None})
    run.attempt("list_group_offsets partitions", admin.list_group_offsets,
                {"p-group": [tp], "p-manual": None})
    run.attempt("alter_group_offsets", admin.alter_group_offsets, "p-group",
                {tp: OffsetAndMetadata(1, "meta", -1)})
    run.attempt("reset_group_offsets", admin.reset_group_offsets, "p-group",
                {tp: OffsetSpec.EARLIEST, TopicPartition(topic, 1): 1})
    run.attempt("delete_group_offsets", admin.delete_group_offsets, "p-group", [tp])
    run.attempt("list_partition_offsets", admin.list_partition_offsets,
                {tp: OffsetSpec.LATEST, TopicPartition(topic, 1): OffsetSpec.EARLIEST,
                 TopicPartition(topic, 2): OffsetSpec.MAX_TIMESTAMP})
    run.attempt("delete_records", admin.delete_records, {tp: 1})
    run.attempt("elect_leaders", admin.elect_leaders, 0, {topic: [0]})
    run.attempt("alter_partition_reassignments", admin.alter_partition_reassignments,
                {tp: [1]})
    run.attempt("delete_groups", admin.delete_groups, ["p-manual"])
    run.attempt("delete_topics", admin.delete_topics, ["p-del"])
