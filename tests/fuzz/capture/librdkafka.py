"""The librdkafka source: confluent-kafka's admin, producers and consumers. The sasl and
controller sources produce with rd_produce and RD_PRODUCERS too."""
from __future__ import annotations

import time
from typing import Any

from tests.fuzz.capture.common import CALL_TIMEOUT, QUIET, Run, gather

# confluent_kafka is imported in the functions that use it, as in the single-file capture:
# `--help` and a run of sources that do not use it skip its import (a few tenths of a second).


def librdkafka_workload(run: Run) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": run.bootstrap, **QUIET})
    topic = "r-events"
    # Phase by phase: a client-side error in one must not cost the frames of the others.
    run.attempt("admin topics", _rd_admin_topics, run, admin, topic)
    run.attempt("admin security", _rd_admin_security, run, admin, topic)
    run.attempt("produce", rd_produce, run, run.bootstrap, topic, RD_PRODUCERS)
    run.attempt("consume", _rd_consume, run, topic)
    run.attempt("admin groups", _rd_admin_groups, run, admin, topic)


def _rd_admin_topics(run: Run, admin: Any, topic: str) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions, NewTopic, ResourceType)
    run.settle("create_topics validate_only", lambda: admin.create_topics(
        [NewTopic("r-checked", 2, 1)], validate_only=True, request_timeout=CALL_TIMEOUT))
    run.settle("create_topics", lambda: admin.create_topics(
        [NewTopic(topic, 3, 1, config={"retention.ms": "3600000"}), NewTopic("r-del", 1, 1)],
        operation_timeout=10, request_timeout=CALL_TIMEOUT))
    # librdkafka wants the partition count beside an explicit assignment.
    run.settle("create_topics assigned", lambda: admin.create_topics(
        [NewTopic("r-assigned", 2, replica_assignment=[[1], [1]])]))
    run.settle("create_partitions", lambda: admin.create_partitions([NewPartitions(topic, 4)]))
    run.settle("describe_configs", lambda: admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic), ConfigResource(ResourceType.BROKER, "1")]))
    run.settle("alter_configs", lambda: admin.alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "7200000"})]))
    changes = [ConfigEntry("segment.bytes", "1048576",
                           incremental_operation=AlterConfigOpType.SET),
               ConfigEntry("cleanup.policy", "compact",
                           incremental_operation=AlterConfigOpType.APPEND),
               ConfigEntry("max.message.bytes", None,
                           incremental_operation=AlterConfigOpType.DELETE)]
    run.settle("incremental_alter_configs", lambda: admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=changes)]))
    run.settle("describe_cluster",
               lambda: admin.describe_cluster(include_authorized_operations=True))
    run.settle("describe_topics", lambda: admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True))
    run.attempt("list_topics", admin.list_topics, timeout=CALL_TIMEOUT)
    run.attempt("cluster_id", lambda: admin.list_topics(timeout=CALL_TIMEOUT).cluster_id)


def _rd_admin_security(run: Run, admin: Any, topic: str) -> None:
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, ResourcePatternType, ResourceType,
                                       ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:rita", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "r-", ResourcePatternType.PREFIXED, "User:rita",
                   "127.0.0.1", AclOperation.DESCRIBE, AclPermissionType.DENY),
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                   "User:rita", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)]
    run.settle("create_acls", lambda: admin.create_acls(bindings))
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    run.settle("describe_acls", lambda: admin.describe_acls(everything))
    run.settle("describe_acls topic", lambda: admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.MATCH, "User:rita", None,
        AclOperation.ANY, AclPermissionType.ALLOW)))
    run.settle("delete_acls", lambda: admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY), everything]))
    run.settle("alter_user_scram_credentials", lambda: admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("rita", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 4096), b"rita-secret", b"salt-of-rita"),
        UserScramCredentialUpsertion("rita", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 8192), b"rita-secret")]))
    run.settle("describe_user_scram_credentials",
               lambda: admin.describe_user_scram_credentials(["rita"]))
    run.settle("describe_user_scram_credentials all", admin.describe_user_scram_credentials)
    run.settle("alter_user_scram_credentials delete", lambda: admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("rita", ScramMechanism.SCRAM_SHA_512)]))


# (label, producer settings): idempotent with every codec, and the non-idempotent acks.
RD_PRODUCERS: list[tuple[str, dict[str, Any]]] = [
    ("idempotent", {"enable.idempotence": True, "acks": "all"}),
    *[(codec, {"enable.idempotence": True, "acks": "all", "compression.type": codec})
      for codec in ("gzip", "snappy", "lz4", "zstd")],
    ("acks=1", {"acks": 1}),
    ("acks=0", {"acks": 0}),
]


def rd_produce(run: Run, bootstrap: str, topic: str,
                variants: list[tuple[str, dict[str, Any]]], count: int = 40) -> None:
    from confluent_kafka import Producer
    now = int(time.time() * 1000)
    for label, settings in variants:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                             "batch.size": 8192, "message.timeout.ms": 15000, **QUIET,
                             **settings})
        failed: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
        for i in range(count):
            headers = [("trace", f"t{i}".encode())] if i % 3 == 0 else None
            run.attempt(f"produce {label}", producer.produce, topic,
                        value=f"{label} value {i} ".encode() * 3,
                        key=None if i % 5 == 0 else f"key-{i % 7}".encode(),
                        headers=headers, timestamp=now + i, on_delivery=delivered)
        left = producer.flush(CALL_TIMEOUT)
        if left or failed:
            run.fail(f"produce {label}", f"{left} undelivered; {failed[:2]}")


def _rd_consume(run: Run, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    base = {"bootstrap.servers": run.bootstrap, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, **QUIET}
    consumer = Consumer({**base, "group.id": "r-group", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = _rd_poll(consumer, 60, 20.0)
        if not got:
            run.fail("consumer subscribe", "no message within 20s")
        run.attempt("commit", consumer.commit, asynchronous=False)
        if got:
            run.attempt("commit message", consumer.commit, message=got[-1], asynchronous=False)
        parts = [TopicPartition(topic, p) for p in range(3)]
        run.attempt("committed", consumer.committed, parts, timeout=CALL_TIMEOUT)
        run.attempt("position", consumer.position, parts)
        run.attempt("get_watermark_offsets", consumer.get_watermark_offsets,
                    TopicPartition(topic, 0), timeout=10, cached=False)
        stamp = int(time.time() * 1000) - 60_000
        run.attempt("offsets_for_times", consumer.offsets_for_times,
                    [TopicPartition(topic, p, stamp) for p in range(3)], timeout=10)
        assigned = consumer.assignment()
        if assigned:
            # With a leader epoch, librdkafka validates the position (OffsetForLeaderEpoch).
            run.attempt("seek", consumer.seek, TopicPartition(
                assigned[0].topic, assigned[0].partition, 1, leader_epoch=0))
            run.attempt("pause", consumer.pause, assigned)
            run.attempt("resume", consumer.resume, assigned)
            _rd_poll(consumer, 5, 3.0)
            run.attempt("commit offsets", consumer.commit, offsets=[
                TopicPartition(assigned[0].topic, assigned[0].partition, 1)],
                asynchronous=False)
    finally:
        consumer.close()
    static = Consumer({**base, "group.id": "r-static", "group.instance.id": "r-static-1",
                       "partition.assignment.strategy": "cooperative-sticky"})
    try:
        static.subscribe([topic])
        _rd_poll(static, 10, 10.0)
    finally:
        static.close()
    manual = Consumer({**base, "group.id": "r-manual", "isolation.level": "read_committed",
                       "enable.auto.commit": False})
    try:
        manual.assign([TopicPartition(topic, 1, 0), TopicPartition(topic, 2, 0)])
        _rd_poll(manual, 10, 8.0)
        run.attempt("commit assigned", manual.commit, offsets=[TopicPartition(topic, 1, 2)],
                    asynchronous=False)
    finally:
        manual.close()


def _rd_poll(consumer: Any, want: int, seconds: float) -> list[Any]:
    def message() -> list[Any]:
        msg = consumer.poll(0.5)
        return [msg] if msg is not None and msg.error() is None else []
    return gather(message, want, seconds)


def _rd_admin_groups(run: Run, admin: Any, topic: str) -> None:
    from confluent_kafka import (ConsumerGroupTopicPartitions, ElectionType, IsolationLevel,
                                 TopicPartition)
    from confluent_kafka.admin import OffsetSpec
    run.settle("list_consumer_groups", lambda: admin.list_consumer_groups(request_timeout=10))
    run.settle("describe_consumer_groups", lambda: admin.describe_consumer_groups(
        ["r-group", "r-static"], include_authorized_operations=True))
    run.settle("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("r-group")]))
    run.settle("alter_consumer_group_offsets", lambda: admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("r-group", [TopicPartition(topic, 0, 1)])]))
    stamp = int(time.time() * 1000) - 60_000
    specs = {TopicPartition(topic, 0): OffsetSpec.latest(),
             TopicPartition(topic, 1): OffsetSpec.earliest(),
             TopicPartition(topic, 2): OffsetSpec.for_timestamp(stamp),
             TopicPartition(topic, 3): OffsetSpec.max_timestamp()}
    run.settle("list_offsets", lambda: admin.list_offsets(specs))
    run.settle("list_offsets read_committed", lambda: admin.list_offsets(
        specs, isolation_level=IsolationLevel.READ_COMMITTED))
    run.settle("delete_records", lambda: admin.delete_records([TopicPartition(topic, 0, 2)]))
    run.settle("elect_leaders", lambda: admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, 0)]))
    # Not r-static: a static member stays in its group after close, until its session ends.
    run.settle("delete_consumer_groups", lambda: admin.delete_consumer_groups(
        ["r-group", "r-manual"], request_timeout=10))
    run.settle("delete_topics", lambda: admin.delete_topics(["r-del"], operation_timeout=10))


def librdkafka_txn_workload(run: Run) -> None:
    """confluent-kafka's transactional producer in a consume-transform-produce loop:
    InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
    TxnOffsetCommit, EndTxn commit and abort, and a read_committed consumer."""
    from confluent_kafka import Consumer, Producer
    rd_produce(run, run.bootstrap, "r-txn-in", RD_PRODUCERS[:1], count=20)
    consumer = Consumer({"bootstrap.servers": run.bootstrap, "group.id": "r-txn-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", **QUIET})
    producer = Producer({"bootstrap.servers": run.bootstrap, "transactional.id": "r-txn",
                         "linger.ms": 5, **QUIET})
    try:
        consumer.subscribe(["r-txn-in"])
        run.attempt("init_transactions", producer.init_transactions, CALL_TIMEOUT)
        for commit in (True, False, True):
            records = _rd_poll(consumer, 5, 10.0)
            run.attempt("transaction", _rd_transaction, producer, consumer, records, commit)
    finally:
        consumer.close()
        producer.flush(CALL_TIMEOUT)


def _rd_transaction(producer: Any, consumer: Any, records: list[Any], commit: bool) -> None:
    producer.begin_transaction()
    for m in records:
        producer.produce("r-txn-out", m.value(), key=m.key())
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), CALL_TIMEOUT)
    if commit:
        producer.commit_transaction(CALL_TIMEOUT)
    else:
        producer.abort_transaction(CALL_TIMEOUT)
