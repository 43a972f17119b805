"""Dynamic broker configs and replication throttles (KIP-73) on a real 3-node cluster.

kafka-configs (the Java tool) sets, describes and deletes per-broker and cluster-default
dynamic configs, which survive a restart; a throttled follower catching up is measurably
held to the throttled rate while an unthrottled partition on the same brokers is not; a
dynamic retention default takes effect for a topic without an override.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Producer

from tests.cluster import LocalCluster
from tests.integration.java_tools import KafkaTools, kafka_jars  # noqa: F401 (fixture)
from tests.integration.test_cluster import RACKS, WAIT_S, _address, _partitions
from tests.polling import read_until, wait_until
from tests.wire import Wire

# A short quota window (3 samples of 1 s) keeps the burst a fresh throttle lets through
# small; small replica fetches keep the overshoot of one fetch small.
CONFIG = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
          "replica.lag.time.max.ms": 3000, "log.retention.check.interval.ms": 300,
          "replication.quota.window.num": 3, "replication.quota.window.size.seconds": 1,
          "replica.fetch.max.bytes": 65536}
WINDOW_S = 3.0
FETCH_MAX = 65536
SET, DELETE = 0, 1
BROKER, TOPIC = 4, 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("throttle"), nodes=3, racks=RACKS,
                     extra_config=CONFIG)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def tools(cluster: LocalCluster, kafka_jars: Path) -> KafkaTools:  # noqa: F811
    return KafkaTools(cluster.bootstrap)


def _alter(cluster: LocalCluster, resource_type: int, name: str,
           changes: dict[str, str | None], via: int = 1) -> None:
    """IncrementalAlterConfigs through node `via` (it relays to the active controller)."""
    configs = [{"name": k, "config_operation": SET if v is not None else DELETE, "value": v}
               for k, v in changes.items()]
    with Wire(_address(cluster, via)) as w:
        resp = w.request(44, 1, {"resources": [{"resource_type": resource_type,
                                                "resource_name": name, "configs": configs}],
                                 "validate_only": False})
    result = resp.responses[0]
    assert result.error_code == 0, (result.error_code, result.error_message)


def _describe(tools: KafkaTools, *entity: str) -> dict[str, str]:
    """kafka-configs --describe of a broker entity: name -> "value sensitive=... synonyms"."""
    result = tools.configs("--describe", "--entity-type", "brokers", *entity).ok()
    out = {}
    for line in result.lines:
        setting, sep, rest = line.strip().partition(" sensitive=")
        if sep:
            name, _, value = setting.partition("=")
            out[name] = f"{value} {rest.split(' ', 1)[1]}"
    return out


def _create(cluster: LocalCluster, name: str, assignment: list[list[int]],
            config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def create() -> bool:
        try:
            for future in admin.create_topics([NewTopic(
                    name, len(assignment), replica_assignment=assignment,
                    config=config or {})],
                    request_timeout=15).values():
                future.result()
            return True
        except Exception as exc:
            if "fenced" not in str(exc) and "larger than the" not in str(exc):
                raise
            return False
    wait_until(create, WAIT_S, f"{name} created")
    for node_id in cluster.node_ids:
        wait_until(lambda: len(_partitions(_address(cluster, node_id), name)) ==
                   len(assignment), WAIT_S, f"node {node_id} to know {name}")


def _log_size(cluster: LocalCluster, node_id: int, topic: str, partition: int = 0) -> int:
    directory = cluster.specs[node_id - 1].log_dir / f"{topic}-{partition}"
    total = 0
    for segment in directory.glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _produce(cluster: LocalCluster, topics: list[str], nbytes: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 16384, "enable.idempotence": False})
    value = b"x" * 1000
    for i in range(nbytes // len(value)):
        for topic in topics:
            while True:
                try:
                    p.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    p.poll(0.1)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "records left unacknowledged"


# -- dynamic broker configs through kafka-configs ------------------------------------------


def test_kafka_configs_sets_describes_and_deletes_dynamic_broker_configs(
        cluster: LocalCluster, tools: KafkaTools) -> None:
    tools.configs("--entity-type", "brokers", "--entity-name", "1", "--alter",
                  "--add-config", "leader.replication.throttled.rate=1000000").ok()
    tools.configs("--entity-type", "brokers", "--entity-default", "--alter",
                  "--add-config", "follower.replication.throttled.rate=2000000,"
                                  "leader.replication.throttled.rate=3000000").ok()
    broker1 = _describe(tools, "--entity-name", "1")
    assert broker1["leader.replication.throttled.rate"] == (
        "1000000 synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:leader.replication.throttled.rate=3000000, "
        "DEFAULT_CONFIG:leader.replication.throttled.rate=9223372036854775807}"), broker1
    defaults = _describe(tools, "--entity-default")
    assert defaults["follower.replication.throttled.rate"].startswith("2000000 "), defaults
    assert defaults["leader.replication.throttled.rate"].startswith("3000000 "), defaults

    # Every node applies the cluster default (broker 2 has no per-broker value).
    everything = _describe(tools, "--entity-name", "2", "--all")
    assert everything["follower.replication.throttled.rate"].startswith(
        "2000000 synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"), everything
    assert everything["num.io.threads"].startswith("8 "), everything

    # Keys that cannot change live are refused, naming the key; nothing is stored.
    refused = tools.configs("--entity-type", "brokers", "--entity-name", "1", "--alter",
                            "--add-config", "num.io.threads=4")
    assert refused.returncode != 0 and "num.io.threads" in refused.stdout + refused.stderr, \
        refused.describe()
    assert "InvalidRequestException" in refused.stdout + refused.stderr, refused.describe()
    bad = tools.configs("--entity-type", "brokers", "--entity-name", "1", "--alter",
                        "--add-config", "leader.replication.throttled.rate=fast")
    assert bad.returncode != 0 and "leader.replication.throttled.rate" in \
        bad.stdout + bad.stderr, bad.describe()
    assert "InvalidConfigurationException" in bad.stdout + bad.stderr, bad.describe()
    assert "num.io.threads" not in _describe(tools, "--entity-name", "1")

    # The values live in the metadata log: a restarted node still has them.
    cluster.stop_node(1)
    cluster.start_node(1, timeout=WAIT_S)
    again = _describe(tools, "--entity-name", "1")
    assert again["leader.replication.throttled.rate"].startswith("1000000 "), again

    tools.configs("--entity-type", "brokers", "--entity-name", "1", "--alter",
                  "--delete-config", "leader.replication.throttled.rate").ok()
    tools.configs("--entity-type", "brokers", "--entity-default", "--alter",
                  "--delete-config", "follower.replication.throttled.rate,"
                                     "leader.replication.throttled.rate").ok()
    assert "leader.replication.throttled.rate" not in _describe(tools, "--entity-name", "1")
    assert _describe(tools, "--entity-default") == {}


# -- replication throttles ------------------------------------------------------------------


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_throttle_holds_back_a_catching_up_follower_not_other_partitions(
        cluster: LocalCluster, side: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    slow, free = f"thr-{side}-{suffix}", f"free-{side}-{suffix}"
    leader, follower = 2, 3
    _create(cluster, slow, [[leader, follower, 1]])
    _create(cluster, free, [[leader, follower, 1]])
    wait_until(lambda: _partitions(_address(cluster, 1), slow).get(0, (None,))[0] == leader,
               WAIT_S, f"{slow} led by {leader}")
    throttled_node = leader if side == "leader" else follower
    rate = 50_000
    _alter(cluster, TOPIC, slow, {f"{side}.replication.throttled.replicas":
                                  f"0:{throttled_node}"})
    _alter(cluster, BROKER, str(throttled_node), {f"{side}.replication.throttled.rate":
                                                  str(rate)})
    try:
        cluster.stop_node(follower)
        before = _log_size(cluster, follower, slow)
        nbytes = 2_000_000
        _produce(cluster, [slow, free], nbytes)
        target = _log_size(cluster, leader, slow)
        assert target - before >= nbytes
        if side == "leader":
            # The leader throttles only replicas outside the ISR.
            wait_until(lambda: follower not in _partitions(_address(cluster, leader),
                                                           slow).get(0, (0, (), (follower,)))[2],
                       WAIT_S, f"{follower} out of the ISR of {slow}")

        # From before the start: the fetcher may run before the node reports ready.
        started = time.monotonic()
        cluster.start_node(follower, timeout=WAIT_S)
        free_target = _log_size(cluster, leader, free)
        wait_until(lambda: _log_size(cluster, follower, free) == free_target, WAIT_S,
                   f"the unthrottled {free} to catch up on node {follower}")
        # It moves, throttled: some bytes arrive, but never more than the rate allows.
        wait_until(lambda: _log_size(cluster, follower, slow) > before, WAIT_S,
                   f"{slow} to make progress on node {follower}")
        read_until(lambda: time.monotonic() - started, lambda t: t >= 8.0, 30.0, 0.5)
        moved = _log_size(cluster, follower, slow) - before
        elapsed = time.monotonic() - started
        allowed = rate * (elapsed + WINDOW_S) + 3 * FETCH_MAX
        # (Short of caught up, when the throttle allows less than the whole backlog: a
        # separate check of that would fail on a machine slow enough to allow it all.)
        assert moved <= allowed, (f"{moved} bytes replicated in {elapsed:.1f}s, a throttle of "
                                  f"{rate} B/s allows at most {allowed:.0f}")
    finally:
        # Lifting the throttle lets it catch up.
        _alter(cluster, BROKER, str(throttled_node),
               {f"{side}.replication.throttled.rate": None})
    wait_until(lambda: _log_size(cluster, follower, slow) == target, WAIT_S,
               f"{slow} to catch up on node {follower} once unthrottled")


# -- topic defaults ------------------------------------------------------------------------


def _log_start(cluster: LocalCluster, topic: str) -> int:
    leader = _partitions(_address(cluster, 1), topic)[0][0]
    with Wire(_address(cluster, leader)) as w:
        resp = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def test_dynamic_retention_default_applies_to_topics_without_an_override(
        cluster: LocalCluster, tools: KafkaTools) -> None:
    topic = f"ret-{uuid.uuid4().hex[:6]}"
    kept = f"ret-kept-{uuid.uuid4().hex[:6]}"
    _create(cluster, topic, [[1, 2, 3]], {"segment.bytes": "20000"})
    _create(cluster, kept, [[1, 2, 3]], {"segment.bytes": "20000",
                                         "retention.bytes": "-1"})
    _produce(cluster, [topic, kept], 150_000)
    assert _log_start(cluster, topic) == 0
    tools.configs("--entity-type", "brokers", "--entity-default", "--alter",
                  "--add-config", "log.retention.bytes=40000").ok()
    try:
        assert read_until(lambda: _log_start(cluster, topic), lambda s: s > 0, WAIT_S, 0.3) \
            > 0, "the dynamic log.retention.bytes never deleted a segment"
        assert read_until(lambda: _log_size(cluster, 3, topic), lambda s: s <= 60000, WAIT_S,
                          0.3) <= 60000, "a follower kept its segments"
        described = tools.topic_configs(topic, "--all")
        assert described["retention.bytes"].startswith(
            "40000 synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=40000"), \
            described
        # A topic override wins over the dynamic default.
        assert _log_start(cluster, kept) == 0
    finally:
        tools.configs("--entity-type", "brokers", "--entity-default", "--alter",
                      "--delete-config", "log.retention.bytes").ok()
