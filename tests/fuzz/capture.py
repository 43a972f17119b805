"""Record the Kafka request frames real clients send to rillet, into the fuzz corpus.

    .venv/bin/python -m tests.fuzz.capture                       # every source (~4 min)
    .venv/bin/python -m tests.fuzz.capture --only java,sasl      # some; others' files stay

Each client source gets a fresh single-node broker (tests/harness.py BrokerProcess) behind a
RecordingProxy (tests/fuzz/recording.py): the broker advertises the proxy's address, so every
connection a client opens, after Metadata too, is recorded. The workload drives as many APIs
as the client offers; whatever the broker answers (an error, a refusal) does not matter, the
frames the client sent do. The sources:

- java: Apache Kafka's CLI tools (tools/kafka/), so the Java client.
- librdkafka: confluent-kafka; kafka-python; aiokafka: their producers, consumers, admins.
- sasl: a SASL_PLAINTEXT broker; PLAIN and SCRAM logins of every client above.
- rillet (listener controller): a 3-node LocalCluster whose controller links are tapped
  (tests/tcp_proxy.py LinkProxy tap): Vote, BeginQuorumEpoch, EndQuorumEpoch, metadata Fetch,
  FetchSnapshot, BrokerRegistration, BrokerHeartbeat, AlterPartition, Envelope, driven by
  topic changes, produce, a SIGTERM and a SIGKILL of nodes and a snapshot a node must fetch.

At most MAX_PER_VERSION frames per (source, API key, version) are kept: distinct ones (the
correlation id aside), spread over their sizes, in the order they were sent. Produce batches
are kept small by the workloads, so no frame is far above 16 KB. At the end a table says which
versions of which API each source sent, and which served APIs no source sent. Tool and call
failures are listed too: they may be rillet bugs, or a client feature rillet leaves out.
Every broker, proxy and temp dir ends in a finally block; every tool and call is bounded.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from kio.index import api_key_map

from rillet.apis import load_all
from rillet.client.admin import AdminClient as RilletAdmin
from tests.cluster import LocalCluster
from tests.fuzz import corpus
from tests.fuzz.recording import RecordingProxy, StreamTap
from tests.harness import BrokerProcess
from tests.integration.java_tools import KafkaTools, fetch_kafka_jars
from tests.polling import poll_until, read_until

T = TypeVar("T")
# AlterConfigs is deprecated in the clients, and still an API rillet serves: it is sent.
warnings.filterwarnings("ignore", message="alter_configs has been deprecated",
                        category=DeprecationWarning)

MAX_PER_VERSION = 12
# Frames a client sends are Kafka requests: a key this high or version this odd is not one
# (e.g. raw SASL bytes of a v0 handshake) and is dropped.
MAX_API_KEY = 100
MAX_API_VERSION = 30
TOOL_TIMEOUT = 60.0
CALL_TIMEOUT = 20.0
# PLAINTEXT clients are User:ANONYMOUS: a super user under the StandardAuthorizer, so the ACL
# APIs really store and delete bindings instead of answering SECURITY_DISABLED. No initial
# rebalance delay: short-lived console consumers get their partitions before they time out.
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BROKER_CONFIG = {"auto.create.topics.enable": "true", "num.partitions": 3,
                 "group.initial.rebalance.delay.ms": 0,
                 "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_paula="paula-secret";')
SASL_CONFIG = {"auto.create.topics.enable": "true", "num.partitions": 3,
               "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
               "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
               "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
               "connection.failed.authentication.delay.ms": "50"}
# (mechanism, user, password) the sasl source logs in with; the SCRAM users are created first.
SASL_LOGINS = [("PLAIN", "paula", "paula-secret"), ("SCRAM-SHA-256", "sam", "sam-secret"),
               ("SCRAM-SHA-512", "sam", "sam-secret")]
# Quick fencing and small snapshots: the cluster run sees fencing, ISR changes and a
# snapshot fetch within its minutes. With an authorizer on, a broker relays admin requests
# to the controller inside an Envelope (rillet/forwarding.py); User:ANONYMOUS, the
# principal of every PLAINTEXT client and of the nodes themselves, is a super user.
CLUSTER_CONFIG = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
                  "metadata.log.max.record.bytes.between.snapshots": 4096,
                  "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS",
                  "auto.create.topics.enable": "true", "num.partitions": 3}
QUIET = {"log_level": 3}   # librdkafka: errors only, not every reconnect


# -- what one capture run is ------------------------------------------------------------------


@dataclass
class Run:
    """One source's capture: the address its clients use, scratch space, what failed."""
    source: str
    bootstrap: str
    scratch: Path
    # (label, what it said, whether the workload asked for an error on purpose)
    failures: list[tuple[str, str, bool]] = field(default_factory=list)

    def fail(self, label: str, why: str, expected: bool = False) -> None:
        self.failures.append((label, why, expected))
        print(f"  [{self.source}] {label}: {'refused' if expected else 'FAILED'} {why}",
              flush=True)

    def attempt(self, label: str, fn: Callable[..., T], *args: Any,
                expect_error: bool = False, **kw: Any) -> T | None:
        """fn(*args, **kw), or None with the failure noted: one refused call must not end
        the workload, whose later calls still record frames."""
        try:
            return fn(*args, **kw)
        except Exception as exc:  # any client error: the frames were sent, that is the point
            self.fail(label, brief(exc), expect_error)
            return None

    def settle(self, label: str, call: Callable[[], Any]) -> None:
        """Make a confluent-kafka admin call and wait for what it returned: a future or a
        dict of them."""
        result = self.attempt(label, call)
        futures = result.values() if isinstance(result, dict) else [result] if result else []
        for future in futures:
            self.attempt(label, future.result, CALL_TIMEOUT)

    def tools(self) -> KafkaTools:
        return KafkaTools(self.bootstrap)

    def tool(self, label: str, tool: str, *args: str, input: str | None = None,
             timeout: float = TOOL_TIMEOUT, expect_error: bool = False) -> str:
        """Run one Kafka CLI tool; its stdout ('' when it failed to run at all)."""
        try:
            result = self.tools().run(tool, *args, input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(label, f"timed out after {timeout:.0f}s")
            return ""
        if result.returncode != 0:
            self.fail(label, f"exit {result.returncode}: {tool_error(result.stderr)}",
                      expect_error)
        return result.stdout


def brief(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text[:240]


def tool_error(stderr: str) -> str:
    """The line of a tool's stderr that says what went wrong, shortened."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    telling = [line for line in lines if "Exception" in line or "ERROR" in line
               or "Error" in line]
    return (telling or lines or ["(no output)"])[-1][:240]


@contextmanager
def recorded_broker(root: Path, config: dict[str, Any],
                    protocol: str = "PLAINTEXT") -> Iterator[RecordingProxy]:
    """A fresh single node behind a RecordingProxy that it advertises; the proxy."""
    broker = BrokerProcess(root / "data", config=config)
    proxy = RecordingProxy(broker.host, broker.port)
    try:
        broker.config["listeners"] = f"{protocol}://{broker.host}:{broker.port}"
        broker.config["advertised.listeners"] = f"{protocol}://127.0.0.1:{proxy.port}"
        broker.start()
        yield proxy
    finally:
        try:
            broker.stop(20)
        finally:
            proxy.close()


# -- java: Kafka's CLI tools ----------------------------------------------------------------


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


# -- librdkafka: confluent-kafka ------------------------------------------------------------


def librdkafka_workload(run: Run) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": run.bootstrap, **QUIET})
    topic = "r-events"
    # Phase by phase: a client-side error in one must not cost the frames of the others.
    run.attempt("admin topics", _rd_admin_topics, run, admin, topic)
    run.attempt("admin security", _rd_admin_security, run, admin, topic)
    run.attempt("produce", _rd_produce, run, run.bootstrap, topic, RD_PRODUCERS)
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


def _rd_produce(run: Run, bootstrap: str, topic: str,
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
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    return got


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


# -- kafka-python ---------------------------------------------------------------------------


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
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    return got


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


# -- aiokafka -------------------------------------------------------------------------------


def aiokafka_workload(run: Run) -> None:
    asyncio.run(_aio_workload(run))


async def _aio_attempt(run: Run, label: str, awaitable: Any) -> bool:
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
    await _aio_attempt(run, "admin start", admin.start())
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
        await _aio_attempt(run, "admin close", admin.close())


async def _aio_admin_topics(run: Run, admin: Any, topic: str) -> None:
    from aiokafka.admin import NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    await _aio_attempt(run, "create_topics", admin.create_topics(
        [NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"}),
         NewTopic("a-del", 1, 1)]))
    await _aio_attempt(run, "create_partitions", admin.create_partitions(
        {topic: NewPartitions(4)}))
    await _aio_attempt(run, "describe_configs", admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic),
         ConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True))
    await _aio_attempt(run, "alter_configs", admin.alter_configs([ConfigResource(
        ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]))
    await _aio_attempt(run, "describe_cluster", admin.describe_cluster())
    await _aio_attempt(run, "describe_topics", admin.describe_topics([topic]))
    await _aio_attempt(run, "list_topics", admin.list_topics())


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
        if not await _aio_attempt(run, f"{label} start", producer.start()):
            await _aio_attempt(run, f"{label} stop", producer.stop())
            continue
        try:
            sends = [await producer.send(topic, f"{codec} value {i} ".encode() * 3,
                                         key=f"k{i % 5}".encode() if i % 4 else None,
                                         headers=[("h", b"x")] if i % 3 == 0 else None)
                     for i in range(30)]
            await _aio_attempt(run, f"{label} send", asyncio.gather(*sends))
            batch = producer.create_batch()
            for i in range(5):
                batch.append(key=None, value=f"batched {i}".encode(), timestamp=None)
            await _aio_attempt(run, f"{label} send_batch",
                               producer.send_batch(batch, topic, partition=1))
        except Exception as exc:
            run.fail(label, brief(exc))
        finally:
            await _aio_attempt(run, f"{label} stop", producer.stop())


async def _aio_consume(run: Run, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=run.bootstrap, group_id="a-group",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=6000, heartbeat_interval_ms=1000)
    await _aio_attempt(run, "consumer start", consumer.start())
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < 60 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            got += sum(len(records) for records in batches.values())
        if not got:
            run.fail("AIOKafkaConsumer getmany", "no record within 20s")
        await _aio_attempt(run, "commit", consumer.commit())
        parts = [TopicPartition(topic, p) for p in range(3)]
        await _aio_attempt(run, "committed", consumer.committed(parts[0]))
        await _aio_attempt(run, "seek_to_beginning", consumer.seek_to_beginning())
        await _aio_attempt(run, "getmany", consumer.getmany(timeout_ms=1000))
        await _aio_attempt(run, "seek_to_end", consumer.seek_to_end())
        await _aio_attempt(run, "beginning_offsets", consumer.beginning_offsets(parts))
        await _aio_attempt(run, "end_offsets", consumer.end_offsets(parts))
        stamp = int(time.time() * 1000) - 60_000
        await _aio_attempt(run, "offsets_for_times",
                           consumer.offsets_for_times({tp: stamp for tp in parts}))
        assigned = sorted(consumer.assignment())
        if assigned:
            await _aio_attempt(run, "position", consumer.position(assigned[0]))
            await _aio_attempt(run, "commit offsets", consumer.commit({assigned[0]: 1}))
    finally:
        await _aio_attempt(run, "consumer stop", consumer.stop())


async def _aio_admin_groups(run: Run, admin: Any, topic: str) -> None:
    from aiokafka.admin import RecordsToDelete
    from aiokafka.structs import TopicPartition
    await _aio_attempt(run, "list_consumer_groups", admin.list_consumer_groups())
    await _aio_attempt(run, "describe_consumer_groups", admin.describe_consumer_groups(
        ["a-group"], include_authorized_operations=True))
    await _aio_attempt(run, "list_consumer_group_offsets",
                       admin.list_consumer_group_offsets("a-group"))
    await _aio_attempt(run, "delete_records", admin.delete_records(
        {TopicPartition(topic, 0): RecordsToDelete(1)}))
    await _aio_attempt(run, "delete_topics", admin.delete_topics(["a-del"]))


# -- sasl: the logins of every client -------------------------------------------------------


def sasl_workload(run: Run) -> None:
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(_rd_sasl(run.bootstrap, "PLAIN", "admin", "admin-secret"))
    run.settle("create SCRAM users", lambda: admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("sam", ScramCredentialInfo(
            getattr(ScramMechanism, mech.replace("-", "_")), 4096), b"sam-secret")
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")]))
    for mechanism, user, password in SASL_LOGINS:
        _sasl_logins(run, mechanism, user, password)
    # Wrong passwords: the SaslAuthenticate a refused login sends.
    _sasl_logins(run, "SCRAM-SHA-256", "sam", "wrong", expect_failure=True)
    _sasl_logins(run, "PLAIN", "paula", "wrong", expect_failure=True)


def _rd_sasl(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            **QUIET}


def _sasl_logins(run: Run, mechanism: str, user: str, password: str,
                 expect_failure: bool = False) -> None:
    """One login per client with these credentials, each doing a little work."""
    from confluent_kafka.admin import AdminClient
    topic = "s-events"
    tag = f"{mechanism} {user}{' (wrong password)' if expect_failure else ''}"
    label = f"librdkafka {tag}"
    conf = _rd_sasl(run.bootstrap, mechanism, user, password)
    if expect_failure:
        admin = AdminClient(conf)
        try:
            admin.list_topics(timeout=5)
            run.fail(label, "a wrong password was accepted")
        except Exception:
            pass  # refused, as it should be
    else:
        _rd_produce(run, run.bootstrap, topic, [(label, {
            key: value for key, value in conf.items() if key != "bootstrap.servers"})],
            count=5)
    _kp_sasl(run, topic, mechanism, user, password, expect_failure)
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password}
    if not expect_failure:
        asyncio.run(_aio_sasl(run, topic, security))
        _java_sasl(run, mechanism, user, password)


def _kp_sasl(run: Run, topic: str, mechanism: str, user: str, password: str,
             expect_failure: bool) -> None:
    from kafka import KafkaProducer
    label = f"kafka-python {mechanism} {user}"
    try:
        producer = KafkaProducer(bootstrap_servers=run.bootstrap, acks="all",
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                 sasl_plain_username=user, sasl_plain_password=password,
                                 request_timeout_ms=10000, max_block_ms=8000,
                                 bootstrap_timeout_ms=5000, reconnect_backoff_max_ms=1000)
    except Exception as exc:
        if not expect_failure:
            run.fail(label, brief(exc))
        return
    try:
        future = producer.send(topic, b"over sasl")
        producer.flush(10)
        future.get(10)
        if expect_failure:
            run.fail(label, "a wrong password was accepted")
    except Exception as exc:
        if not expect_failure:
            run.fail(label, brief(exc))
    finally:
        producer.close(timeout=5)


async def _aio_sasl(run: Run, topic: str, security: dict[str, str]) -> None:
    from aiokafka import AIOKafkaProducer
    label = f"aiokafka {security['sasl_mechanism']}"
    producer = AIOKafkaProducer(bootstrap_servers=run.bootstrap, **security)
    try:
        if await _aio_attempt(run, f"{label} start", producer.start()):
            await _aio_attempt(run, f"{label} send", producer.send_and_wait(topic, b"aio"))
    finally:
        await _aio_attempt(run, f"{label} stop", producer.stop())


def _java_sasl(run: Run, mechanism: str, user: str, password: str) -> None:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
              if mechanism == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule")
    props = run.scratch / f"{mechanism}-{user}.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                     f'sasl.jaas.config={module} required username="{user}" '
                     f'password="{password}";\n')
    bs = ("--bootstrap-server", run.bootstrap)
    run.tool(f"java {mechanism} topics --list", "kafka-topics", *bs, "--list",
             "--command-config", str(props))
    run.tool(f"java {mechanism} console-producer", "kafka-console-producer", *bs,
             "--topic", "s-events", "--producer.config", str(props), input="java\nsasl\n")


# -- rillet: the controller links of a 3-node cluster ---------------------------------------


def controller_workload(tmp: Path, run: Run, tap: StreamTap) -> None:
    """Drive a 3-node cluster, its controller links tapped, through the quorum's and the
    brokers' lifecycles."""
    cluster = LocalCluster(tmp / "cluster", nodes=3, proxied=True, extra_config=CLUSTER_CONFIG,
                           link_tap=tap)
    try:
        cluster.start()
        _cluster_lifecycle(cluster, run)
    finally:
        cluster.close()


def _cluster_lifecycle(cluster: LocalCluster, run: Run) -> None:
    leader = _quorum_leader(cluster, run, cluster.node_ids)
    follower = next(i for i in cluster.node_ids if i != leader)
    # Requests to a node that is not the controller reach it in an Envelope.
    run.bootstrap = _address(cluster, follower)
    _cluster_admin(run, "c-events")
    _rd_produce(run, cluster.bootstrap, "c-events", RD_PRODUCERS[:1], count=200)
    # SIGTERM: controlled shutdown (heartbeats asking to shut down), ISR shrink; then a
    # restart registers again and the ISR grows back (AlterPartition both ways).
    cluster.stop_node(follower)
    _rd_produce(run, _others(cluster, follower), "c-events", RD_PRODUCERS[:1], count=50)
    cluster.start_node(follower)
    _wait_full_isr(cluster, run, "c-events")
    # SIGKILL of the quorum leader: the others elect one (Vote, BeginQuorumEpoch).
    cluster.kill_node(leader)
    leader = _quorum_leader(cluster, run, [i for i in cluster.node_ids if i != leader])
    cluster.restore_all()
    _wait_full_isr(cluster, run, "c-events")
    # SIGTERM of the leader: it resigns (EndQuorumEpoch).
    cluster.stop_node(leader)
    survivors = [i for i in cluster.node_ids if i != leader]
    leader = _quorum_leader(cluster, run, survivors)
    cluster.restore_all()
    _snapshot_catch_up(cluster, run, leader)
    run.bootstrap = _address(cluster, next(i for i in cluster.node_ids if i != leader))
    run.tool("leader-election preferred", "kafka-leader-election", "--bootstrap-server",
             run.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    run.attempt("unregister_broker 99", asyncio.run, _unregister(run.bootstrap, 99),
                expect_error=True)


def _cluster_admin(run: Run, topic: str) -> None:
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, AdminClient, AlterConfigOpType,
                                       ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo,
                                       ScramMechanism, UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": run.bootstrap, **QUIET})
    run.settle("create_topics rf3", lambda: admin.create_topics(
        [NewTopic(topic, 3, 3), NewTopic("c-more", 2, 3, config={"retention.ms": "60000"}),
         NewTopic("c-del", 1, 2)], operation_timeout=15, request_timeout=CALL_TIMEOUT))
    run.settle("create_partitions", lambda: admin.create_partitions([NewPartitions("c-more", 4)]))
    change = ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)
    run.settle("incremental_alter_configs", lambda: admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "c-more", incremental_configs=[change])]))
    run.settle("alter_configs", lambda: admin.alter_configs([ConfigResource(
        ResourceType.TOPIC, "c-more", set_config={"retention.ms": "180000"})]))
    run.settle("alter_user_scram_credentials", lambda: admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("cleo", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 4096), b"cleo-secret")]))
    run.settle("delete_topics", lambda: admin.delete_topics(["c-del"], operation_timeout=15))
    run.attempt("describe_quorum", asyncio.run, _describe_quorum(run.bootstrap))
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:cleo",
                         "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    run.settle("create_acls", lambda: admin.create_acls([binding]))
    run.settle("delete_acls", lambda: admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)]))


async def _describe_quorum(bootstrap: str) -> Any:
    async with RilletAdmin(bootstrap, timeout=10) as admin:
        return await admin.describe_quorum()


async def _unregister(bootstrap: str, broker_id: int) -> None:
    async with RilletAdmin(bootstrap, timeout=10) as admin:
        await admin.unregister_broker(broker_id)


def _address(cluster: LocalCluster, node_id: int) -> str:
    return next(s.client_address for s in cluster.specs if s.node_id == node_id)


def _others(cluster: LocalCluster, node_id: int) -> str:
    return ",".join(_address(cluster, i) for i in cluster.node_ids if i != node_id)


def _quorum_leader(cluster: LocalCluster, run: Run, among: list[int]) -> int:
    bootstrap = ",".join(_address(cluster, i) for i in among)

    def leader() -> int | None:
        try:
            return asyncio.run(_describe_quorum(bootstrap)).leader_id
        except Exception:
            return None
    found = read_until(leader, lambda node: node in among, 60.0, interval=0.5)
    if found not in among:
        run.fail("quorum leader", f"none among {among} within 60s")
        return among[0]
    return found


def _wait_full_isr(cluster: LocalCluster, run: Run, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    def full() -> bool:
        try:
            md = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET}).list_topics(
                topic, timeout=5)
            parts = md.topics[topic].partitions.values()
            return bool(parts) and all(len(p.isrs) == 3 for p in parts)
        except Exception:
            return False
    if not poll_until(full, 45.0, interval=1.0):
        run.fail(f"ISR of {topic}", "not back to 3 replicas within 45s")


def _snapshot_catch_up(cluster: LocalCluster, run: Run, leader: int) -> None:
    """A node away while the leader snapshots (small snapshot interval) and drops the log
    behind it comes back to FetchSnapshot."""
    from confluent_kafka.admin import AdminClient, NewTopic
    away = next(i for i in cluster.node_ids if i != leader)
    cluster.kill_node(away)
    admin = AdminClient({"bootstrap.servers": _others(cluster, away), **QUIET})
    run.settle("create_topics while away", lambda: admin.create_topics(
        [NewTopic(f"c-away-{i}", 1, 1) for i in range(40)], operation_timeout=15,
        request_timeout=CALL_TIMEOUT))
    snapshots = next(s.log_dir for s in cluster.specs if s.node_id == leader) / \
        "__metadata" / "snapshots"
    if not poll_until(lambda: any(snapshots.glob("*.checkpoint")), 30.0, interval=0.5):
        run.fail("metadata snapshot", "the leader wrote none within 30s")
    cluster.start_node(away)
    node = cluster.node(away)
    if not poll_until(lambda: "snapshot" in node.log(), 30.0, interval=0.5):
        run.fail("snapshot catch-up", f"node {away} never mentioned a snapshot")


# -- keeping a few frames of each kind, and the report ----------------------------------------


def _masked(frame: bytes) -> bytes:
    """The frame without its correlation id: requests that differ only there are one."""
    return frame[:8] + b"\0\0\0\0" + frame[12:]


def plausible(frame: bytes) -> bool:
    key, version = corpus.api_of(frame)
    return 0 <= key <= MAX_API_KEY and 0 <= version <= MAX_API_VERSION


def select(frames: list[bytes], limit: int = MAX_PER_VERSION) -> list[bytes]:
    """At most `limit` distinct frames per (key, version), spread from the smallest to the
    largest, in the order they were recorded."""
    kinds: dict[tuple[int, int], list[int]] = defaultdict(list)
    seen: set[bytes] = set()
    for index, frame in enumerate(frames):
        if plausible(frame) and (masked := _masked(frame)) not in seen:
            seen.add(masked)
            kinds[corpus.api_of(frame)].append(index)
    keep: set[int] = set()
    for indexes in kinds.values():
        by_size = sorted(indexes, key=lambda i: (len(frames[i]), i))
        if len(by_size) > limit:
            step = (len(by_size) - 1) / (limit - 1)
            by_size = [by_size[round(n * step)] for n in range(limit)]
        keep.update(by_size)
    return [frames[i] for i in sorted(keep)]


def api_name(key: int) -> str:
    name = api_key_map.get(key, f"api_{key}")
    return "".join(part.capitalize() for part in name.split("_"))


def _versions(versions: set[int]) -> str:
    """1,2,3,5 -> '1-3,5'."""
    out: list[str] = []
    for v in sorted(versions):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


def report(failures: dict[str, list[tuple[str, str, bool]]], seconds: float) -> None:
    sources: dict[str, list[bytes]] = {}
    for listener in corpus.LISTENERS:
        for source, frames in corpus.load(listener).items():
            sources[f"{source}-{listener}" if listener == "controller" else source] = frames
    seen: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for source, frames in sources.items():
        for key, version in corpus.coverage(frames):
            seen[key][source].add(version)
    names = list(sources)
    width = max(12, *(len(n) for n in names)) + 2
    print(f"\n{'API':32}" + "".join(f"{n:>{width}}" for n in names))
    for key in sorted(seen):
        cells = "".join(f"{_versions(seen[key].get(n, set())) or '-':>{width}}"
                        for n in names)
        print(f"{f'{key:>2} {api_name(key)}':32}{cells}")
    registry = load_all()
    print("\nServed APIs no source sent:")
    for key, spec in sorted(registry.items()):
        if key not in seen:
            print(f"  {key:>2} {api_name(key)} v{spec.min_version}-{spec.max_version} "
                  f"({spec.scope} listener)")
    print("Served versions no source sent:")
    for key, spec in sorted(registry.items()):
        got = set().union(*seen[key].values()) if key in seen else set()
        missing = set(range(spec.min_version, spec.max_version + 1)) - got
        if key in seen and missing:
            print(f"  {key:>2} {api_name(key)}: v{_versions(missing)}")
    sent_unserved = sorted(k for k in seen if k not in registry)
    if sent_unserved:
        print("Sent but not served: " + ", ".join(f"{k} {api_name(k)}" for k in sent_unserved))
    for heading, wanted in (("Failures", False), ("Refusals the workload asked for", True)):
        print(f"\n{heading} (tool or call, and what it said):")
        for source, items in failures.items():
            for label, why, expected in items:
                if expected == wanted:
                    print(f"  {source}: {label}: {why}")
    total = sum(len(f) for fs in sources.values() for f in fs)
    count = sum(len(fs) for fs in sources.values())
    print(f"\ncorpus: {count} frames, {total} bytes in {corpus.CORPUS_DIR}; "
          f"capture took {seconds:.0f}s")


# -- main -------------------------------------------------------------------------------------


CLIENT_SOURCES: dict[str, tuple[Callable[[Run], None], dict[str, Any], str]] = {
    "java": (java_workload, BROKER_CONFIG, "PLAINTEXT"),
    "librdkafka": (librdkafka_workload, BROKER_CONFIG, "PLAINTEXT"),
    "kafka-python": (kafka_python_workload, BROKER_CONFIG, "PLAINTEXT"),
    "aiokafka": (aiokafka_workload, BROKER_CONFIG, "PLAINTEXT"),
    "sasl": (sasl_workload, SASL_CONFIG, "SASL_PLAINTEXT"),
}
ALL_SOURCES = [*CLIENT_SOURCES, "rillet"]


def capture_client(source: str, tmp: Path) -> list[tuple[str, str, bool]]:
    workload, config, protocol = CLIENT_SOURCES[source]
    root = tmp / source
    root.mkdir()
    with recorded_broker(root, dict(config), protocol) as proxy:
        run = Run(source, proxy.bootstrap, root)
        run.attempt("workload", workload, run)
        frames = proxy.frames()
    _keep(source, "client", frames)
    return run.failures


def capture_controller(tmp: Path) -> list[tuple[str, str, bool]]:
    run = Run("rillet", "", tmp)
    tap = StreamTap()
    run.attempt("cluster", controller_workload, tmp, run, tap)
    _keep("rillet", "controller", tap.frames())
    return run.failures


def _keep(source: str, listener: str, frames: list[bytes]) -> None:
    kept = select(frames)
    if not kept:
        print(f"{source}: nothing recorded; its corpus file is left as it was", flush=True)
        return
    path = corpus.write(source, listener, kept)
    largest = max(len(f) for f in kept)
    print(f"{source}: {len(frames)} frames recorded, {len(kept)} kept "
          f"({path.stat().st_size} bytes, largest {largest}) -> {path.name}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(ALL_SOURCES),
                        help=f"comma-separated sources among {','.join(ALL_SOURCES)}")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(ALL_SOURCES)
    if unknown:
        parser.error(f"unknown sources {sorted(unknown)}")
    started = time.monotonic()
    if {"java", "sasl", "rillet"} & set(chosen):
        fetch_kafka_jars()
    failures: dict[str, list[tuple[str, str, bool]]] = {}
    with tempfile.TemporaryDirectory(prefix="rillet-capture-") as tmp:
        for source in chosen:
            print(f"== {source} ({time.monotonic() - started:.0f}s)", flush=True)
            if source == "rillet":
                failures[source] = capture_controller(Path(tmp))
            else:
                failures[source] = capture_client(source, Path(tmp))
    report(failures, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
