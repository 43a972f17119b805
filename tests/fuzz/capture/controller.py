"""The rillet source (listener controller): a 3-node LocalCluster whose controller links are
tapped, driven through the quorum's and the brokers' lifecycles."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rillet.client.admin import AdminClient as RilletAdmin
from tests.cluster import LocalCluster
from tests.fuzz.capture.common import CALL_TIMEOUT, QUIET, STANDARD, Run
from tests.fuzz.capture.librdkafka import RD_PRODUCERS, rd_produce
from tests.fuzz.recording import StreamTap
from tests.polling import poll_until, read_until

# confluent_kafka is imported in the functions that use it, as in the single-file capture:
# `--help` and a run of sources that do not use it skip its import (a few tenths of a second).

# Quick fencing and small snapshots: the cluster run sees fencing, ISR changes and a
# snapshot fetch within its minutes. With an authorizer on, a broker relays admin requests
# to the controller inside an Envelope (rillet/forwarding.py); User:ANONYMOUS, the
# principal of every PLAINTEXT client and of the nodes themselves, is a super user.
CLUSTER_CONFIG = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
                  "metadata.log.max.record.bytes.between.snapshots": 4096,
                  "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS",
                  "auto.create.topics.enable": "true", "num.partitions": 3}


def controller_workload(tmp: Path, run: Run, tap: StreamTap) -> None:
    """Drive a 3-node cluster, its controller links tapped, through the quorum's and the
    brokers' lifecycles."""
    # Controller links only (addressed=False): the corpus was recorded through them.
    cluster = LocalCluster(tmp / "cluster", nodes=3, proxied=True, addressed=False,
                           extra_config=CLUSTER_CONFIG, link_tap=tap)
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
    rd_produce(run, cluster.bootstrap, "c-events", RD_PRODUCERS[:1], count=200)
    # SIGTERM: controlled shutdown (heartbeats asking to shut down), ISR shrink; then a
    # restart registers again and the ISR grows back (AlterPartition both ways).
    cluster.stop_node(follower)
    rd_produce(run, _others(cluster, follower), "c-events", RD_PRODUCERS[:1], count=50)
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
