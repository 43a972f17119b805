"""Metadata (key 3), v0-12.

Brokers, controller, cluster id, topics with ids, partitions with leader,
leader epoch, replicas and ISR. Topics named in the request that do not
exist are created when auto.create.topics.enable and the request allows it.
With an authorizer, a topic the principal may not DESCRIBE is left out of an all-topics
answer and answered TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE on
the cluster or the topic. Topic authorized operations are answered when asked for (v8+;
cluster operations only in v8-10, as Kafka does). v0: empty topic list = all. v1+: null =
all; is_internal, controller. v2: cluster id. v4: allow_auto_topic_creation. v7: leader
epoch. v9: flexible. v10: topic ids. v12: topic by id without name.
"""
from __future__ import annotations

import logging
from typing import Any

from ..controller.topics import TopicSpec, validate_topic_name
from ..metadata.image import MetadataImage, TopicInfo
from ..protocol import errors
from ..protocol.codec import FramingError
from .registry import CLUSTER, OPERATIONS_UNSET, RequestContext, api

log = logging.getLogger(__name__)


def _partitions(topic: TopicInfo, image: MetadataImage) -> list[dict[str, Any]]:
    out = []
    for p in sorted(topic.partitions):
        part = topic.partitions[p]
        leader_known = part.leader in image.live_broker_ids
        out.append({
            "error_code": 0 if leader_known else errors.LeaderNotAvailable.code,
            "partition_index": p,
            # A leader that is not live (fenced, until the controller has moved its
            # leaderships) is named -1, as Kafka does: the brokers list leaves it out, and a
            # client that reads leader_id without the partition's error code would look for
            # a broker it has no address of (kafka-python 3.0.12 then stops sending for good).
            "leader_id": part.leader if leader_known else -1,
            "leader_epoch": part.leader_epoch,
            "replica_nodes": part.replicas,
            "isr_nodes": part.isr,
            "offline_replicas": [r for r in part.replicas if r not in image.live_broker_ids],
        })
    return out


def _topic(topic: TopicInfo, image: MetadataImage) -> dict[str, Any]:
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name == "__consumer_offsets",
            "partitions": _partitions(topic, image)}


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except errors.KafkaError:
        return False
    return True


async def _auto_create(ctx: RequestContext, names: list[str]) -> set[str]:
    """Create `names`; the ones that exist now or may be on their way: created here, by
    someone else first, or with an outcome not known yet (no controller reachable, a
    timeout: retriable errors). A creation the controller refused is not coming."""
    broker = ctx.broker
    results = await broker.channel.create_topics([TopicSpec(n) for n in names])
    coming = set()
    for result in results:
        if result.error is None:
            log.info("auto-created topic %s (%d partitions)", result.name,
                     result.num_partitions)
        if result.error is None or result.error.retriable \
                or isinstance(result.error, errors.TopicAlreadyExists):
            coming.add(result.name)
        else:
            log.info("auto-creating topic %s refused: %s", result.name, result.error)
    return coming


@api(key=3, versions=(0, 12))
async def metadata(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    image: MetadataImage = broker.image
    requested = req.topics
    if ctx.version == 0 and not requested:
        requested = None
    elif requested is not None:
        # Each topic answered once, as Kafka's handler takes the names as a set: a request
        # naming one topic a million times costs one answer, not a million.
        requested = list({(t.name, getattr(t, "topic_id", None)): t for t in requested}.values())
    topics: list[dict[str, Any]] = []
    if requested is None:
        topics = [_topic(t, image) for t in image.topics.values()
                  if ctx.authorized("DESCRIBE", "TOPIC", t.name, quiet=True)]
    else:
        if ctx.version < 12 and any(t.name is None for t in requested):
            # As Kafka: the name may be null (a topic by id) from v12 only, and the v10-11
            # response has no null name to answer it with.
            raise FramingError(f"Metadata v{ctx.version}: a topic name can be null from v12")
        allow = getattr(req, "allow_auto_topic_creation", True)
        auto_create = allow and broker.config["auto.create.topics.enable"]
        if not auto_create:
            # Named topics this node does not know may be on their way: a moment's wait
            # before UNKNOWN_TOPIC_OR_PARTITION, which makes librdkafka drop partitions it
            # learnt from a node with a newer view.
            await ctx.await_topics(t.name for t in requested if t.name is not None)
            image = broker.image
        missing = [t.name for t in requested
                   if t.name is not None and t.name not in image.topics]
        creatable = [n for n in missing if not n.startswith("__") and _valid_name(n)
                     and (ctx.authorized("CREATE", "CLUSTER", CLUSTER, quiet=True)
                          or ctx.authorized("CREATE", "TOPIC", n))]
        being_created: set[str] = set()
        if creatable and auto_create:
            being_created = await _auto_create(ctx, creatable)
            image = broker.image
        for t in requested:
            name = t.name
            topic_id = getattr(t, "topic_id", None)
            if name is None and topic_id is not None:
                name = image.topic_names.get(topic_id)
                if name is None:
                    topics.append({"error_code": errors.UnknownTopicId.code, "name": None,
                                   "topic_id": topic_id, "partitions": []})
                    continue
            info = image.topics.get(name) if name is not None else None
            if name is not None and not ctx.authorized("DESCRIBE", "TOPIC", name):
                topics.append({"error_code": errors.TopicAuthorizationFailed.code,
                               "name": name, "topic_id": topic_id, "partitions": []})
                continue
            if info is None:
                # Asked to create it, it is not here yet (being created, or created and not yet
                # applied on this node): LEADER_NOT_AVAILABLE, as Kafka answers for a topic it
                # has just auto-created, so the client asks again instead of giving up.
                code = (errors.LeaderNotAvailable.code if name in being_created
                        else errors.UnknownTopicOrPartition.code if _valid_name(name or "")
                        else errors.InvalidTopicException.code)
                topics.append({"error_code": code, "name": name,
                               "topic_id": topic_id, "partitions": []})
            else:
                topics.append(_topic(info, image))
    if getattr(req, "include_topic_authorized_operations", False):
        for t in topics:
            if not t["error_code"]:
                t["topic_authorized_operations"] = ctx.authorized_operations("TOPIC", t["name"])
    brokers = [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
               for b, host, port in image.brokers_for(ctx.session.listener_name)]
    return ctx.response({
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": broker.cluster_id,
        # As KRaft brokers do: the node asked, which relays controller requests. A client
        # routing by it never chases a controller that died a moment ago.
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": ctx.authorized_operations("CLUSTER", CLUSTER)
        if getattr(req, "include_cluster_authorized_operations", False) else OPERATIONS_UNSET,
    })
