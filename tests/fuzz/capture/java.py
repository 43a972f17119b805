"""The java source: Apache Kafka's CLI tools (tools/kafka/), so the Java client."""
from __future__ import annotations

import json
import time

from tests.fuzz.capture.common import Run


def java_workload(run: Run) -> None:
    bs = ("--bootstrap-server", run.bootstrap)
    topic = "j-events"
    run.tool("broker-api-versions", "run-tool",
             "org.apache.kafka.tools.BrokerApiVersionsCommand", *bs)
    _java_topics(run, bs, topic)
    _java_produce(run, bs, topic)
    _java_consume(run, bs, topic)
    _java_groups(run, bs, topic)
    _java_configs(run, bs, topic)
    _java_acls(run, bs, topic)
    _java_partitions(run, bs, topic)
    _java_perf(run, bs)
    run.tool("metadata-quorum status", "kafka-metadata-quorum", *bs, "describe", "--status")
    run.tool("metadata-quorum replication", "kafka-metadata-quorum", *bs, "describe",
             "--replication")
    run.tool("cluster cluster-id", "kafka-cluster", "cluster-id", *bs)
    run.tool("cluster unregister", "kafka-cluster", "unregister", *bs, "--id", "99",
             expect_error=True)
    run.tool("groups --list", "run-tool", "org.apache.kafka.tools.GroupsCommand", *bs,
             "--list")
    run.tool("features describe", "run-tool", "org.apache.kafka.tools.FeatureCommand", *bs,
             "describe")
    run.tool("topics --delete", "kafka-topics", *bs, "--delete", "--topic", "j-del")


def java_txn_workload(run: Run) -> None:
    """WriteTxnMarkers (v1 from the Java 4.3 Admin): aborts by producer id and epoch;
    DescribeProducers: describe-producers and find-hanging; the Java transactional producer
    (kafka-producer-perf-test --transactional-id: FindCoordinator, InitProducerId,
    AddPartitionsToTxn, EndTxn); ListTransactions and DescribeTransactions: list, describe."""
    bs = ("--bootstrap-server", run.bootstrap)
    run.tool("topics --create", "kafka-topics", *bs, "--create", "--topic", "j-txn",
             "--partitions", "1", "--replication-factor", "1")
    run.tool("producer-perf-test --transactional-id", "kafka-producer-perf-test",
             "--topic", "j-txn", "--num-records", "300", "--record-size", "50",
             "--throughput", "-1", "--transactional-id", "j-txn-perf",
             "--transaction-duration-ms", "200", "--command-property",
             f"bootstrap.servers={run.bootstrap}")
    run.tool("transactions list", "kafka-transactions", *bs, "list")
    run.tool("transactions describe", "kafka-transactions", *bs, "describe",
             "--transactional-id", "j-txn-perf")
    run.tool("transactions describe-producers", "kafka-transactions", *bs,
             "describe-producers", "--topic", "j-txn", "--partition", "0")
    run.tool("transactions find-hanging", "kafka-transactions", *bs, "find-hanging",
             "--broker-id", "1")
    for pid, epoch in ((1000, 0), (1001, 3)):
        run.tool("transactions abort", "kafka-transactions", *bs, "abort", "--topic", "j-txn",
                 "--partition", "0", "--producer-id", str(pid), "--producer-epoch", str(epoch),
                 "--coordinator-epoch", "0")


def _java_topics(run: Run, bs: tuple[str, str], topic: str) -> None:
    run.tool("topics --create", "kafka-topics", *bs, "--create", "--topic", topic,
             "--partitions", "3", "--replication-factor", "1",
             "--config", "retention.ms=3600000", "--config", "max.message.bytes=100000")
    run.tool("topics --create j-del", "kafka-topics", *bs, "--create", "--topic", "j-del",
             "--partitions", "1", "--if-not-exists")
    run.tool("topics --create --replica-assignment", "kafka-topics", *bs, "--create",
             "--topic", "j-assigned", "--replica-assignment", "1,1")
    run.tool("topics --list", "kafka-topics", *bs, "--list")
    run.tool("topics --describe", "kafka-topics", *bs, "--describe", "--topic", topic)
    run.tool("topics --describe --under-replicated", "kafka-topics", *bs, "--describe",
             "--under-replicated-partitions")
    run.tool("topics --alter --partitions", "kafka-topics", *bs, "--alter", "--topic", topic,
             "--partitions", "4")


def _java_produce(run: Run, bs: tuple[str, str], topic: str) -> None:
    keyed = ("--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
    run.tool("console-producer keys", "kafka-console-producer", *bs, "--topic", topic, *keyed,
             input="".join(f"key-{i}:value {i}\n" for i in range(20)))
    # A topic nobody created: Metadata asks for it to be created (auto.create.topics.enable).
    run.tool("console-producer no keys", "kafka-console-producer", *bs, "--topic", "j-auto",
             input="".join(f"line {i}\n" for i in range(10)))
    run.tool("console-producer headers", "kafka-console-producer", *bs, "--topic", topic,
             "--reader-property", "parse.headers=true", "--reader-property", "parse.key=true",
             input="h1:v1,h2:v2\tkey-h\tvalue-h\nh3:v3\tkey-i\tvalue-i\n")
    run.tool("console-producer acks=1", "kafka-console-producer", *bs, "--topic", topic,
             "--producer-property", "acks=1", "--producer-property", "enable.idempotence=false",
             input="one\ntwo\n")
    for codec in ("gzip", "lz4", "zstd", "snappy"):
        run.tool(f"console-producer {codec}", "kafka-console-producer", *bs, "--topic", topic,
                 *keyed, "--producer-property", f"compression.type={codec}",
                 "--producer-property", "linger.ms=20",
                 input="".join(f"k{i % 4}:{codec} payload {i} " + "abc" * 20 + "\n"
                               for i in range(40)))


def _java_consume(run: Run, bs: tuple[str, str], topic: str) -> None:
    group = ("--group", "j-group")
    run.tool("console-consumer --group", "kafka-console-consumer", *bs, "--topic", topic,
             *group, "--from-beginning", "--max-messages", "60", "--timeout-ms", "10000",
             timeout=50)
    run.tool("console-consumer --group again", "kafka-console-consumer", *bs, "--topic",
             topic, *group, "--max-messages", "1", "--timeout-ms", "4000", timeout=40)
    run.tool("console-consumer read_committed", "kafka-console-consumer", *bs, "--topic",
             topic, *group, "--max-messages", "1", "--timeout-ms", "4000",
             "--consumer-property", "isolation.level=read_committed", timeout=40)
    # Until its timeout, heartbeating quickly: the one consumer that sends Heartbeat.
    run.tool("console-consumer cooperative static", "kafka-console-consumer", *bs,
             "--topic", topic, "--group", "j-static", "--from-beginning",
             "--max-messages", "1000", "--timeout-ms", "4000",
             "--consumer-property", "heartbeat.interval.ms=500",
             "--consumer-property", "group.instance.id=j-static-1",
             "--consumer-property", "partition.assignment.strategy="
             "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", timeout=40)
    # A consumer that reads to its timeout commits on close with the records' leader epoch
    # (one stopping at --max-messages commits without): the next one in its group validates
    # that epoch with OffsetForLeaderEpoch before it fetches.
    for label, first in (("committing", ("--from-beginning",)), ("validating", ())):
        run.tool(f"console-consumer {label}", "kafka-console-consumer", *bs, "--topic",
                 topic, "--group", "j-validate", *first, "--max-messages", "1000",
                 "--timeout-ms", "8000", timeout=40)
    run.tool("console-consumer --partition --offset", "kafka-console-consumer", *bs,
             "--topic", topic, "--partition", "1", "--offset", "2", "--max-messages", "3",
             "--timeout-ms", "4000", timeout=40)
    for label, spec in (("latest", "-1"), ("earliest", "-2"), ("max-timestamp", "-3"),
                        ("timestamp", str(int(time.time() * 1000) - 60_000))):
        run.tool(f"get-offsets {label}", "kafka-get-offsets", *bs, "--topic", topic,
                 "--time", spec)


def _java_groups(run: Run, bs: tuple[str, str], topic: str) -> None:
    cg = ("kafka-consumer-groups", *bs)
    run.tool("consumer-groups --list", *cg, "--list")
    run.tool("consumer-groups --list --state", *cg, "--list", "--state")
    run.tool("consumer-groups --describe", *cg, "--describe", "--group", "j-group")
    run.tool("consumer-groups --describe --members", *cg, "--describe", "--group", "j-group",
             "--members", "--verbose")
    run.tool("consumer-groups --describe --state", *cg, "--describe", "--all-groups",
             "--state")
    run.tool("consumer-groups --reset-offsets", *cg, "--reset-offsets", "--group", "j-group",
             "--topic", topic, "--to-earliest", "--execute")
    run.tool("consumer-groups --reset-offsets --to-datetime", *cg, "--reset-offsets",
             "--group", "j-group", "--topic", topic, "--to-datetime",
             "2020-01-01T00:00:00.000", "--execute")
    run.tool("consumer-groups --delete-offsets", *cg, "--delete-offsets", "--group",
             "j-group", "--topic", f"{topic}:0")
    run.tool("consumer-groups --delete", *cg, "--delete", "--group", "j-static")


def _java_configs(run: Run, bs: tuple[str, str], topic: str) -> None:
    cfg = ("kafka-configs", *bs)
    on_topic = ("--entity-type", "topics", "--entity-name", topic)
    run.tool("configs --describe topic", *cfg, "--describe", *on_topic)
    run.tool("configs --describe --all topic", *cfg, "--describe", "--all", *on_topic)
    run.tool("configs --alter topic", *cfg, "--alter", *on_topic, "--add-config",
             "retention.ms=7200000,segment.bytes=1048576")
    run.tool("configs --alter --delete-config topic", *cfg, "--alter", *on_topic,
             "--delete-config", "segment.bytes")
    run.tool("configs --describe broker", *cfg, "--describe", "--entity-type", "brokers",
             "--entity-name", "1")
    run.tool("configs --describe broker default", *cfg, "--describe", "--entity-type",
             "brokers", "--entity-default")
    run.tool("configs --alter broker", *cfg, "--alter", "--entity-type", "brokers",
             "--entity-name", "1", "--add-config", "log.cleaner.threads=2")
    run.tool("configs --alter broker default", *cfg, "--alter", "--entity-type", "brokers",
             "--entity-default", "--add-config", "log.retention.ms=604800000")
    user = ("--entity-type", "users", "--entity-name", "jim")
    run.tool("configs --alter users SCRAM", *cfg, "--alter", *user, "--add-config",
             "SCRAM-SHA-256=[iterations=4096,password=jim-secret],"
             "SCRAM-SHA-512=[password=jim-secret]")
    run.tool("configs --describe user", *cfg, "--describe", *user)
    run.tool("configs --describe users", *cfg, "--describe", "--entity-type", "users")
    run.tool("configs --alter users --delete-config", *cfg, "--alter", *user,
             "--delete-config", "SCRAM-SHA-512")
    run.tool("configs --alter users quota", *cfg, "--alter", *user, "--add-config",
             "producer_byte_rate=1048576,request_percentage=200")
    run.tool("configs --alter user+client quota", *cfg, "--alter", *user, "--entity-type",
             "clients", "--entity-default", "--add-config", "consumer_byte_rate=2097152")
    run.tool("configs --alter clients quota", *cfg, "--alter", "--entity-type", "clients",
             "--entity-name", "c1", "--add-config", "producer_byte_rate=1048576")
    run.tool("configs --alter users quota --delete-config", *cfg, "--alter", *user,
             "--delete-config", "request_percentage")
    run.tool("configs --describe clients", *cfg, "--describe", "--entity-type", "clients",
             "--entity-name", "c1")
    run.tool("configs --describe groups", *cfg, "--describe", "--entity-type", "groups",
             "--entity-name", "j-group")


def _java_acls(run: Run, bs: tuple[str, str], topic: str) -> None:
    acl = ("kafka-acls", *bs)
    run.tool("acls --add topic", *acl, "--add", "--allow-principal", "User:jim",
             "--operation", "Read", "--operation", "Describe", "--topic", topic)
    run.tool("acls --add group", *acl, "--add", "--allow-principal", "User:jim",
             "--operation", "Read", "--group", "j-group")
    run.tool("acls --add prefixed deny", *acl, "--add", "--deny-principal", "User:eve",
             "--operation", "Write", "--topic", "j-", "--resource-pattern-type", "prefixed")
    run.tool("acls --add --producer", *acl, "--add", "--allow-principal", "User:jim",
             "--producer", "--topic", topic)
    run.tool("acls --add --consumer", *acl, "--add", "--allow-principal", "User:jim",
             "--consumer", "--topic", topic, "--group", "j-group")
    run.tool("acls --list", *acl, "--list")
    run.tool("acls --list topic", *acl, "--list", "--topic", topic)
    run.tool("acls --list principal", *acl, "--list", "--principal", "User:jim")
    run.tool("acls --remove", *acl, "--remove", "--force", "--allow-principal", "User:jim",
             "--operation", "Read", "--topic", topic)
    run.tool("acls --remove prefixed", *acl, "--remove", "--force", "--topic", "j-",
             "--resource-pattern-type", "prefixed")


def _java_partitions(run: Run, bs: tuple[str, str], topic: str) -> None:
    plan = run.scratch / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1]}]}))
    move = run.scratch / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    reassign = ("kafka-reassign-partitions", *bs)
    run.tool("reassign --generate", *reassign, "--generate", "--topics-to-move-json-file",
             str(move), "--broker-list", "1")
    run.tool("reassign --execute", *reassign, "--execute", "--reassignment-json-file",
             str(plan))
    run.tool("reassign --verify", *reassign, "--verify", "--reassignment-json-file", str(plan))
    run.tool("reassign --list", *reassign, "--list")
    run.tool("leader-election preferred", "kafka-leader-election", *bs, "--election-type",
             "preferred", "--all-topic-partitions")
    run.tool("leader-election unclean", "kafka-leader-election", *bs, "--election-type",
             "unclean", "--topic", topic, "--partition", "0")
    run.tool("log-dirs --describe", "kafka-log-dirs", *bs, "--describe")
    run.tool("log-dirs --describe --topic-list", "kafka-log-dirs", *bs, "--describe",
             "--topic-list", topic, "--broker-list", "1")
    offsets = run.scratch / "delete-records.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 1},
        {"topic": topic, "partition": 1, "offset": -1}]}))
    run.tool("delete-records", "kafka-delete-records", *bs, "--offset-json-file", str(offsets))


def _java_perf(run: Run, bs: tuple[str, str]) -> None:
    # Small batches: each Produce frame stays near 4 KB however fast the producer runs.
    for label, extra in (("idempotent", ()), ("zstd", ("compression.type=zstd",))):
        run.tool(f"producer-perf-test {label}", "kafka-producer-perf-test", "--topic",
                 "j-perf", "--num-records", "300", "--record-size", "100", "--throughput",
                 "-1", "--producer-props", f"bootstrap.servers={bs[1]}", "acks=all",
                 "enable.idempotence=true", "batch.size=4096", "linger.ms=5", *extra,
                 timeout=90)
    run.tool("consumer-perf-test", "kafka-consumer-perf-test", *bs, "--topic", "j-perf",
             "--messages", "300", "--timeout", "15000", "--group", "j-perf-group", timeout=90)
    run.tool("verifiable-producer", "kafka-verifiable-producer", *bs, "--topic", "j-verify",
             "--max-messages", "30", "--acks", "-1", timeout=60)
