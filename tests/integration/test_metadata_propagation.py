"""Issue 33: metadata changed through one node is usable at once through every other node.

One 3-node cluster for the module (RF 3, 4 partitions per topic), started fresh: its first
test is also the cluster's first use of consumer groups. The authorizer is on with
allow.everyone.if.no.acl.found, so User:ANONYMOUS (these PLAINTEXT clients) may do anything
on a resource without ACLs, and a DENY binding bites.

Each client (confluent-kafka/librdkafka, kafka-python, the Java client through Kafka's CLI
tools) creates a topic through one node and at once, through the other two, produces,
consumes in a group, commits and queries offsets: no error reaches the application and no
delivery fails. How fast the change travels is measured in bench/metadata_propagation.py,
never asserted here. Then Kafka 3.x config names go through the same cluster, and last a
node cut off from the quorum answers a topic it cannot know with a retriable error.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from rillet.client.admin import AdminClient as RilletAdmin
from tests.cluster import LocalCluster, describe_quorum, live_brokers, metadata_error
from tests.integration.java_tools import (  # noqa: F401  (fixtures are used by name)
    KafkaTools,
    kafka_jars,
    parse_consumed,
    parse_group_offsets,
)
from tests.integration.old_clients import HERE, client_python, run_script
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(600)

PARTITIONS = 4
RECORDS = 40
WAIT_S = 30.0
# Every node enforces a DENY binding within this many seconds of CreateAcls answering. The
# speed is bench/metadata_propagation.py's to measure (tens of milliseconds); this bound only
# has to catch a node that learns of the commit late by a mechanism, not by load: a follower
# that waits out Raft fetch timeouts (2 s each) or a periodic refresh. 5 s is that with room
# for 2 shared cores at load average 15 (a Metadata poll alone can take 100s of ms there),
# so it does not flake.
ACL_BOUND_S = 5.0
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_AUTHORIZATION_FAILED = 29
NOT_COORDINATOR = 16
LEADER_NOT_AVAILABLE = 5
AT_ONCE_SCRIPT = HERE / "old_client_at_once.py"
# Kafka 3.x names a 3.x server.properties may carry: every node starts with them.
STATIC_KAFKA_3X = {"log.message.format.version": "2.8",
                   "log.message.timestamp.difference.max.ms": "3600000",
                   "sasl.kerberos.min.time.before.relogin": "60000"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Proxied controller links: the last test cuts one node off the quorum.
    c = LocalCluster(tmp_path_factory.mktemp("propagation"), nodes=3, proxied=True,
                     extra_config={"num.partitions": PARTITIONS,
                                   "default.replication.factor": 3,
                                   "authorizer.class.name": STANDARD,
                                   "allow.everyone.if.no.acl.found": "true",
                                   **STATIC_KAFKA_3X})
    try:
        c.start()
        wait_until(lambda: all(live_brokers(a) == 3 for a in _addresses(c)), WAIT_S,
                   "every node to see three live brokers")
        yield c
    finally:
        c.close()


def _addresses(cluster: LocalCluster) -> list[str]:
    return [s.client_address for s in cluster.specs]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- confluent-kafka (librdkafka) ------------------------------------------------------------


def _confluent_create(address: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(WAIT_S)


def _confluent_produce(address: str, topic: str) -> list[str]:
    from confluent_kafka import Producer
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                         on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0, "records still undelivered"
    return failures


def _confluent_group(address: str, topic: str, group: str,
                     count: int = RECORDS) -> tuple[int, list[str], int, int]:
    """(records consumed, errors seen, committed total, end offsets total) through `address`."""
    from confluent_kafka import Consumer, TopicPartition
    seen_errors: list[str] = []
    consumer = Consumer({"bootstrap.servers": address, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "error_cb": lambda e: seen_errors.append(f"error_cb {e}")
                         if e.fatal() or not e.retriable() else None})
    try:
        consumer.subscribe([topic])
        consumed = 0

        def poll() -> bool:
            nonlocal consumed
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                seen_errors.append(f"poll {msg.error()}")
            elif msg is not None:
                consumed += 1
            return consumed >= count
        wait_until(poll, WAIT_S, f"{count} records consumed from {topic}", interval=0)
        for tp in consumer.commit(asynchronous=False) or []:
            if tp.error is not None:
                seen_errors.append(f"commit {tp.topic}-{tp.partition}: {tp.error}")
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = sum(tp.offset for tp in consumer.committed(tps, timeout=WAIT_S))
        ends = sum(consumer.get_watermark_offsets(tp, timeout=WAIT_S)[1] for tp in tps)
        return consumed, seen_errors, committed, ends
    finally:
        consumer.close()


# -- kafka-python --------------------------------------------------------------------------


def _kafka_python_create(address: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    finally:
        admin.close()


def _kafka_python_produce(address: str, topic: str) -> list[str]:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=address, linger_ms=5)
    try:
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
                   for i in range(RECORDS)]
        failures = []
        for f in futures:
            try:
                f.get(timeout=WAIT_S)
            except Exception as exc:  # a failed delivery is what the test counts
                failures.append(repr(exc))
        return failures
    finally:
        producer.close()


def _kafka_python_group(address: str, topic: str, group: str,
                        count: int = RECORDS) -> tuple[int, list[str], int, int]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(topic, bootstrap_servers=address, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumed = 0

        def poll() -> bool:
            nonlocal consumed
            consumed += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
            return consumed >= count
        wait_until(poll, WAIT_S, f"{count} records consumed from {topic}", interval=0)
        consumer.commit()   # raises on an error that reaches the application
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = sum(consumer.committed(tp) or 0 for tp in tps)
        ends = sum(consumer.end_offsets(tps).values())
        return consumed, [], committed, ends
    finally:
        consumer.close()


# -- the Java client (Kafka's CLI tools) -------------------------------------------------------


def _java_create(address: str, topic: str) -> None:
    KafkaTools(address).topics("--create", "--topic", topic, "--partitions", str(PARTITIONS),
                               "--replication-factor", "3").ok()


def _java_produce(address: str, topic: str) -> list[str]:
    result = KafkaTools(address).produce_lines(topic, [f"k{i}:v{i}" for i in range(RECORDS)])
    failures = [line for line in result.stderr.splitlines() if "ERROR" in line]
    if result.returncode != 0:
        failures.append(result.describe())
    return failures


def _java_group(address: str, topic: str, group: str,
                count: int = RECORDS) -> tuple[int, list[str], int, int]:
    tools = KafkaTools(address)
    result = tools.consume(topic, count, "--group", group, "--from-beginning")
    problems = [line for line in result.stderr.splitlines() if "ERROR" in line]
    if result.returncode != 0:
        problems.append(result.describe())
    consumed = len(parse_consumed(result)) if result.returncode == 0 else 0
    described = tools.consumer_groups("--describe", "--group", group).ok()
    rows = parse_group_offsets(described, group)
    committed = sum(int(r["CURRENT-OFFSET"]) for r in rows.values())
    ends = sum(tools.end_offsets(topic).values())
    return consumed, problems, committed, ends


Create = Callable[[str, str], None]
Produce = Callable[[str, str], list[str]]
Group = Callable[[str, str, str, int], tuple[int, list[str], int, int]]
CLIENTS: dict[str, tuple[Create, Produce, Group]] = {
    "confluent-kafka": (_confluent_create, _confluent_produce, _confluent_group),
    "kafka-python": (_kafka_python_create, _kafka_python_produce, _kafka_python_group),
    "java": (_java_create, _java_produce, _java_group),
}


# -- the tests ---------------------------------------------------------------------------------


def test_first_consumer_groups_of_a_fresh_cluster_commit_without_error(
        cluster: LocalCluster, kafka_jars: Path) -> None:
    """Regression (issue 33): the first group on a fresh cluster failed with "Coordinator not
    available": the coordinator was named before that node had __consumer_offsets. All three
    clients start their first group at once, each through another node."""
    a = _addresses(cluster)
    topic = _name("first-groups")
    _confluent_create(a[0], topic)
    # Before any group exists no node has __consumer_offsets: a commit sent to any node is
    # answered NOT_COORDINATOR (look the coordinator up again), not the
    # COORDINATOR_NOT_AVAILABLE that failed librdkafka's commit.
    assert [_offset_commit_error(address, topic) for address in a] == [NOT_COORDINATOR] * 3
    assert _confluent_produce(a[0], topic) == []
    with ThreadPoolExecutor(3) as pool:
        runs = {client: pool.submit(group, a[i], topic, _name(f"first-{client}"))
                for i, (client, (_, _, group)) in enumerate(CLIENTS.items())}
        for client, run in runs.items():
            consumed, problems, committed, ends = run.result()
            assert problems == [], f"{client}: {problems}\n{cluster.logs()}"
            assert (consumed, committed, ends) == (RECORDS, RECORDS, RECORDS), client


@pytest.mark.parametrize("client", list(CLIENTS))
def test_topic_created_through_one_node_is_usable_at_once_through_the_others(
        cluster: LocalCluster, kafka_jars: Path, client: str) -> None:
    """Right after the creation answers, each of the two other nodes (each the client's only
    bootstrap) takes a producer, then a consumer group that reads everything, commits and
    queries the end offsets (ListOffsets); both nodes at once, so the test takes the time of
    one."""
    create, produce, group = CLIENTS[client]
    a = _addresses(cluster)
    via = list(CLIENTS).index(client)          # each client creates through another node
    others = [a[(via + 1) % 3], a[(via + 2) % 3]]
    topic = _name(f"at-once-{client}")
    create(a[via], topic)
    # The node that answered had the topic in its own image by then. Which node that is, the
    # client decides: every node names itself controller, and kafka-python asks its least
    # loaded node, not always the bootstrap (seen: a[via] 6 s behind during a quorum election
    # at load average 64 while another node answered).
    assert 0 in [metadata_error(address, topic) for address in a], cluster.logs()
    total = RECORDS * len(others)
    with ThreadPoolExecutor(len(others)) as pool:
        for address, failures in zip(others, pool.map(lambda o: produce(o, topic), others)):
            assert failures == [], f"producing through {address}: {failures}\n{cluster.logs()}"
        groups = pool.map(lambda o: group(o, topic, _name(client), total), others)
        for address, (consumed, problems, committed, ends) in zip(others, groups):
            assert problems == [], f"group through {address}: {problems}\n{cluster.logs()}"
            assert (consumed, committed, ends) == (total, total, total), address


def test_librdkafka_2_0_2_uses_a_topic_at_once_through_the_other_nodes(
        cluster: LocalCluster) -> None:
    """The client that met issue 33 (librdkafka 2.0.2, Debian 12's, through confluent-kafka
    2.0.2 in its own venv): in one process it creates a topic through one node and at once
    produces through each other node, then reads, commits and queries offsets through each.
    No error reaches it ("Unknown partition", "Failed to query logical offset END")."""
    a = _addresses(cluster)
    job = {"create_via": a[2], "others": a[:2], "topic": _name("at-once-librdkafka-2.0.2"),
           "partitions": PARTITIONS, "group": _name("librdkafka-2.0.2"), "count": RECORDS}
    report = run_script(client_python("confluent-kafka"),
                        [str(AT_ONCE_SCRIPT), json.dumps(job)])
    assert report.get("version") == "2.0.2", report
    assert report["errors"] == [], f"{report}\n{cluster.logs()}"
    total = RECORDS * 2
    assert report["nodes"] == {address: {"consumed": total, "committed": total, "ends": total}
                               for address in a[:2]}, report


def test_two_nodes_auto_creating_one_topic_at_once_both_answer_retriably(
        cluster: LocalCluster) -> None:
    """Regression (issue 33): of two nodes auto-creating one name at once, the one that lost
    got TOPIC_ALREADY_EXISTS and, its image not yet holding the topic, answered
    UNKNOWN_TOPIC_OR_PARTITION (final for a producer); it must answer the topic or
    LEADER_NOT_AVAILABLE. Each round asks a pair of nodes at the same moment, as two
    producers' first Metadata would; then two librdkafka producers do it for real."""
    a = _addresses(cluster)
    with ThreadPoolExecutor(2) as pool:
        for r in range(6):
            topic = _name("auto-race")
            pair = [a[r % 3], a[(r + 1) % 3]]
            codes = list(pool.map(lambda address: metadata_error(address, topic,
                                                                 auto_create=True), pair))
            assert set(codes) <= {0, LEADER_NOT_AVAILABLE}, (pair, codes)
        topic = _name("auto-race-produce")
        results = list(pool.map(lambda address: _confluent_produce(address, topic), a[:2]))
    assert results == [[], []], f"{results}\n{cluster.logs()}"


def _offset_commit_error(address: str, topic: str) -> int:
    """OffsetCommit v2 (what an Empty group's manual commit sends) to one node: its code."""
    async def ask() -> int:
        async with RilletAdmin(address, timeout=10) as admin:
            resp = await admin.request(8, 2, {
                "group_id": _name("no-group-yet"), "generation_id": -1, "member_id": "",
                "retention_time": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 0,
                     "committed_metadata": ""}]}]})
            return int(resp.topics[0].partitions[0].error_code)
    return asyncio.run(ask())


def _create_deny_acl(address: str, topic: str) -> None:
    async def create() -> None:
        async with RilletAdmin(address, timeout=10) as admin:
            resp = await admin.request(30, 2, {"creations": [{
                "resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
                "principal": "User:ANONYMOUS", "host": "*", "operation": 2,  # ALL
                "permission_type": 2}]})                                      # DENY
            assert resp.results[0].error_code == 0, resp
    asyncio.run(create())


def _assert_enforced_within_bound(addresses: list[str], topic: str, answered: float) -> None:
    """Each node's time from `answered` (CreateAcls' answer) to refusing Metadata on `topic`
    with TOPIC_AUTHORIZATION_FAILED, polled round the nodes; at most ACL_BOUND_S each (waited
    for up to WAIT_S, so a failure shows the figures)."""
    enforced: dict[str, float] = {}

    def every_node_enforces() -> bool:
        for address in addresses:
            if address not in enforced and \
                    metadata_error(address, topic) == TOPIC_AUTHORIZATION_FAILED:
                enforced[address] = time.monotonic() - answered
        return len(enforced) == len(addresses)
    wait_until(every_node_enforces, WAIT_S, f"every node to enforce the DENY binding on {topic}",
               interval=0.01)
    late = {address: round(s, 3) for address, s in enforced.items() if s > ACL_BOUND_S}
    assert not late, f"enforced later than {ACL_BOUND_S}s after CreateAcls answered: {late}"


def test_deny_acl_is_enforced_by_the_node_that_answered_and_soon_by_every_node(
        cluster: LocalCluster) -> None:
    """CreateAcls through a node that is not the controller (it relays): that node
    enforces the binding by the time it answers, with no waiting; the others within
    ACL_BOUND_S (the speed is bench/metadata_propagation.py's)."""
    from confluent_kafka import Producer
    a = _addresses(cluster)
    leader = _quorum_leader(a[0])
    via = next(i for i, s in enumerate(cluster.specs) if s.node_id != leader)
    topic = _name("denied")
    _confluent_create(a[via], topic)
    assert metadata_error(a[via], topic) == 0
    _create_deny_acl(a[via], topic)
    answered = time.monotonic()
    assert metadata_error(a[via], topic) == TOPIC_AUTHORIZATION_FAILED
    _assert_enforced_within_bound(a, topic, answered)
    failures: list[str] = []
    producer = Producer({"bootstrap.servers": a[(via + 1) % 3], "message.timeout.ms": 10000,
                         "error_cb": lambda e: failures.append(str(e))})
    producer.produce(topic, b"x", on_delivery=lambda err, _m: failures.append(str(err)))
    producer.flush(WAIT_S)
    assert failures and all("AUTHORIZATION" in f.upper() for f in failures), failures


def test_deny_acl_added_by_kafka_acls_is_enforced_for_kafka_python_and_java(
        cluster: LocalCluster, kafka_jars: Path) -> None:
    """The binding added with Kafka's kafka-acls (the Java admin client) through one node:
    every node enforces it within ACL_BOUND_S, and producers through the other two nodes,
    kafka-python and the Java console producer, are refused TOPIC_AUTHORIZATION_FAILED."""
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    a = _addresses(cluster)
    topic = _name("denied-java")
    _confluent_create(a[2], topic)
    KafkaTools(a[2]).run("kafka-acls", "--bootstrap-server", a[2], "--add",
                         "--deny-principal", "User:ANONYMOUS", "--operation", "All",
                         "--topic", topic).ok()
    # From the tool's exit, which follows its CreateAcls answer (the JVM's shutdown only
    # makes the figure smaller than the true one).
    _assert_enforced_within_bound(a, topic, time.monotonic())
    producer = KafkaProducer(bootstrap_servers=a[0], max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"x").get(timeout=WAIT_S)
    finally:
        producer.close()
    refused = KafkaTools(a[1]).produce_lines(topic, ["k:v"])
    assert refused.returncode != 0 or "TopicAuthorizationException" in refused.stderr, \
        refused.describe()
    assert "TopicAuthorizationException" in refused.stderr + refused.stdout, refused.describe()


def _quorum_leader(address: str) -> int:
    answer = describe_quorum(address)
    assert answer is not None and answer.leader_id is not None, answer
    return answer.leader_id


def test_kafka_3x_config_names_are_accepted_with_no_effect(cluster: LocalCluster) -> None:
    """Issue 33: names Kafka 3.x clusters accepted (deprecated since) are not refused: a
    topic with message.format.version and message.timestamp.difference.max.ms, the dynamic
    broker configs sasl.kerberos.min.time.before.relogin and
    log.message.timestamp.difference.max.ms, and (the fixture's) static ones every node
    started with; each is logged as having no effect."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, NewTopic, ResourceType)
    a = _addresses(cluster)
    admin = AdminClient({"bootstrap.servers": a[1]})
    topic = _name("format-v2")
    admin.create_topics([NewTopic(topic, 1, 3, config={
        "message.format.version": "2.8", "message.timestamp.difference.max.ms": "1000"})]
                        )[topic].result(WAIT_S)
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
        key, value, incremental_operation=AlterConfigOpType.SET) for key, value in (
            ("sasl.kerberos.min.time.before.relogin", "60000"),
            ("log.message.timestamp.difference.max.ms", "5000"))])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)
    logs = "\n".join(cluster.node(i).log() for i in cluster.node_ids)
    assert "message.format.version=2.8 accepted" in logs
    assert "message.timestamp.difference.max.ms=1000 accepted" in logs
    assert "sasl.kerberos.min.time.before.relogin=60000 accepted" in logs
    assert "log.message.timestamp.difference.max.ms=5000 accepted" in logs
    for i in cluster.node_ids:
        log = cluster.node(i).log()
        for key, value in STATIC_KAFKA_3X.items():
            assert f"broker config {key}={value} accepted" in log, (i, key)


def test_a_node_cut_off_from_the_quorum_answers_a_new_topic_retriably(
        cluster: LocalCluster) -> None:
    """A topic created while one node cannot hear the quorum: that node, asked to auto-create
    it (its creation cannot reach the controller), answers LEADER_NOT_AVAILABLE, never
    UNKNOWN_TOPIC_OR_PARTITION; once the links heal it serves the topic."""
    a = _addresses(cluster)
    leader = _quorum_leader(a[0])
    behind = next(s for s in cluster.specs if s.node_id != leader)
    topic = _name("while-cut-off")

    def auto_create_answer() -> int:
        """Metadata for the topic with auto-creation allowed, as a producer asks: its code."""
        return metadata_error(behind.client_address, topic, auto_create=True, timeout=20)
    cluster.isolate(behind.node_id)
    try:
        _confluent_create(next(s.client_address for s in cluster.specs if s.node_id == leader),
                          topic)
        assert auto_create_answer() == LEADER_NOT_AVAILABLE
    finally:
        cluster.heal_all()
    wait_until(lambda: auto_create_answer() == 0, WAIT_S,
               f"node {behind.node_id} to serve {topic} once healed")
