"""Topic reconcile through rillet's admin client: create, add partitions, alter configs,
change the replication factor by partition reassignment; a partition decrease becomes a
condition; the finalizer deletes the topic, and lets go when the Cluster is gone or unreachable
for long.
"""
from __future__ import annotations

import asyncio
from typing import Any

import kopf
from rillet.client import AdminClient, KafkaClientError
from rillet.defs.config_error import ConfigError
from rillet.defs.topic_defs import validate_topic_configs
from rillet.protocol import errors

from .. import planner, topics
from ..conditions import Outcome
from ..pause import is_paused
from ..spec import SpecError, parse_topic
from . import access
from .common import kube, one_pass, paused_pass, retry_or_let_go, write_outcome

ADMIN_TIMEOUT_S = 10.0


async def _observe(admin: AdminClient, topic: str) -> topics.ObservedTopic | None:
    described = await admin.describe_topic(topic)
    if described is None:
        return None
    configs = await admin.topic_config_overrides(topic)
    return topics.ObservedTopic(described.name, described.topic_id, described.replicas,
                                described.isr, configs)


async def reconcile(body: Any, meta: Any, spec: Any, status: Any, name: str, namespace: str,
                    patch: kopf.Patch, logger: Any, memo: Any, **_: Any) -> None:
    async with one_pass(memo, "Topic", name, namespace, status, patch) as current:
        if paused_pass(patch, current, meta, body, logger):
            return
        outcome = await _reconcile(body, spec, name, namespace, patch, logger)
        write_outcome(patch, current, outcome, meta.get("generation") or 0, body, logger)


async def _reconcile(body: Any, spec: Any, name: str, namespace: str, patch: kopf.Patch,
                     logger: Any) -> Outcome:
    try:
        ts = parse_topic(name, namespace, dict(spec))
        validate_topic_configs(ts.config_dict, announce=False)
    except SpecError as exc:
        return Outcome(False, exc.reason, str(exc), error=True)
    except ConfigError as exc:
        return Outcome(False, "InvalidConfig", f"spec.config: {exc}", error=True)
    patch.status["topicName"] = ts.topic_name
    cluster = await asyncio.to_thread(kube().get, "Cluster", ts.cluster, namespace)
    if cluster is None:
        return Outcome(False, "ClusterNotFound",
                       f"no Cluster {ts.cluster} in namespace {namespace}; waiting for it",
                       reconciling=True)
    try:
        async with (await access.target_of(cluster)).admin(ADMIN_TIMEOUT_S) as admin:
            observed = await _observe(admin, ts.topic_name)
            brokers = len((await admin.describe_cluster()).brokers) if observed is None \
                else None
            step = topics.plan(ts, observed, brokers)
            if step.refusal:
                reason, message = step.refusal
                _record(patch, observed)
                return Outcome(False, reason, message, error=True)
            if step.create:
                await admin.create_topic(ts.topic_name, ts.partitions, ts.replicas,
                                         ts.config_dict)
                kopf.info(body, reason="TopicCreated",
                          message=f"created topic {ts.topic_name} ({ts.partitions} partitions, "
                                  f"{ts.replicas} replicas)")
            if step.partitions_to:
                await admin.create_partitions(ts.topic_name, step.partitions_to)
                kopf.info(body, reason="PartitionsAdded",
                          message=f"topic {ts.topic_name} now has {step.partitions_to} "
                                  f"partitions")
            if step.set_configs or step.delete_configs:
                await admin.alter_topic_configs(ts.topic_name, step.set_configs,
                                                step.delete_configs)
                kopf.info(body, reason="ConfigChanged",
                          message=f"topic {ts.topic_name}: set {sorted(step.set_configs)}, "
                                  f"removed {list(step.delete_configs)}")
            if not step.empty:
                observed = await _observe(admin, ts.topic_name)
            if step.replicas_to and observed is not None:
                moving = await _change_replication_factor(admin, observed, step.replicas_to,
                                                          body)
                if moving:
                    _record(patch, observed)
                    return Outcome(False, "ReplicationFactorChanging", moving,
                                   reconciling=True)
    except TopicRefused as exc:
        _record(patch, observed)
        return Outcome(False, exc.reason, str(exc), error=True)
    except errors.InvalidReplicationFactor as exc:
        # The broker refused it (brokers went between the check and the request).
        logger.debug("topic %s: %s", ts.topic_name, exc)
        brokers_now = await _broker_count(cluster)
        reason, message = topics.replication_refusal(ts.topic_name, ts.replicas, brokers_now) \
            or ("InvalidReplicationFactor", f"topic {ts.topic_name}: {exc}")
        return Outcome(False, reason, message, error=True)
    except Exception as exc:  # unreachable cluster, broker error: retried by the timer
        # Every pass while it lasts: DEBUG; the condition's change is logged once.
        logger.debug("topic %s: %s", ts.topic_name, exc)
        if _is_connection(exc):
            return Outcome(False, "ClusterNotReady", f"{type(exc).__name__}: {exc}",
                           reconciling=True)
        return Outcome(False, "TopicError", f"{type(exc).__name__}: {exc}", reconciling=True,
                       error=True)
    _record(patch, observed)
    if observed is None:
        return Outcome(False, "TopicNotFound", "topic not visible yet", reconciling=True)
    return Outcome(True, "Ready", f"topic {ts.topic_name}: {observed.partition_count} "
                                  f"partitions, replication factor "
                                  f"{observed.replication_factor}")


async def _change_replication_factor(admin: AdminClient, observed: topics.ObservedTopic,
                                     factor: int, body: Any) -> str | None:
    """Moves the topic's partitions to `factor` replicas (AlterPartitionReassignments, the
    brokers copy the data); what is still under way, or None when every partition has it.

    Level-based: while any partition of the topic is moving nothing new is submitted, so an
    operator restart mid-change never issues a move twice; each pass re-reads the cluster."""
    topic = observed.name
    ongoing = await admin.list_partition_reassignments({topic: sorted(observed.partitions)})
    if ongoing:
        return (f"changing topic {topic}'s replication factor to {factor}: "
                f"{len(ongoing)} of {observed.partition_count} partitions moving")
    if all(len(r) == factor for r in observed.partitions.values()):
        return None
    described = await admin.describe_cluster()
    brokers = [planner.Broker(b, rack) for b, (_, _, rack) in sorted(described.brokers.items())]
    refusal = topics.replication_refusal(topic, factor, len(brokers))
    if refusal:
        raise TopicRefused(*refusal)
    everything = await admin.assignment()
    moves = planner.resize_replicas(everything, topic, factor, brokers)
    codes = await admin.alter_partition_reassignments({k: list(v) for k, v in moves.items()})
    refused = {f"{t}-{p}": c for (t, p), c in codes.items() if c}
    if refused:
        raise KafkaClientError(f"reassignment refused for {refused}")
    kopf.info(body, reason="ReplicationFactorChanging",
              message=f"topic {topic}: moving {len(moves)} partitions to replication factor "
                      f"{factor}")
    return (f"changing topic {topic}'s replication factor to {factor}: {len(moves)} of "
            f"{observed.partition_count} partitions moving")


async def _broker_count(cluster: dict) -> int | None:
    try:
        async with (await access.target_of(cluster)).admin(ADMIN_TIMEOUT_S) as admin:
            return len((await admin.describe_cluster()).brokers)
    except Exception:   # the refusal is told either way; the count is a detail
        return None


class TopicRefused(Exception):
    """A spec the cluster cannot carry out: a condition, not a retry."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _is_connection(exc: Exception) -> bool:
    return isinstance(exc, (KafkaClientError, OSError, asyncio.TimeoutError))


def _record(patch: kopf.Patch, observed: topics.ObservedTopic | None) -> None:
    if observed is not None:
        patch.status["topicId"] = observed.topic_id
        patch.status["partitions"] = observed.partition_count
        patch.status["replicas"] = observed.replication_factor


async def delete(spec: Any, meta: Any, name: str, namespace: str, body: Any, logger: Any,
                 **_: Any) -> None:
    """Delete the Kafka topic; let go (never hang a namespace) when the Cluster is gone,
    being deleted, or unreachable (common.retry_or_let_go). A paused Topic (pause.py) is let
    go and its Kafka topic kept, as Strimzi does."""
    cluster_name = spec.get("cluster")
    topic = spec.get("topicName") or name
    if is_paused(meta):
        logger.info("topic %s is paused: letting it go, the Kafka topic stays", topic)
        return
    cluster = await asyncio.to_thread(kube().get, "Cluster", cluster_name, namespace) \
        if cluster_name else None
    if cluster is None or (cluster.get("metadata") or {}).get("deletionTimestamp"):
        logger.info("cluster %s is gone: letting topic %s go", cluster_name, topic)
        return
    try:
        async with (await access.target_of(cluster)).admin(ADMIN_TIMEOUT_S) as admin:
            deleted = await admin.delete_topic(topic)
        logger.info("topic %s %s", topic, "deleted" if deleted else "was already gone")
    except Exception as exc:
        retry_or_let_go(body, meta, cluster_name, f"topic {topic}", exc)
