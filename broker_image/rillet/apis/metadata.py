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

Each known topic's entry is encoded once per topic change and version, and spliced into
every answer (metadata_topics.py): at thousands of partitions, building and encoding them
per request starved the node (issue 25).
"""
from __future__ import annotations

import logging
from typing import Any

from ..controller.topics import TopicSpec, validate_topic_name
from ..metadata.image import MetadataImage, TopicInfo
from ..protocol import errors
from ..protocol.codec import FramingError, response_schema
from ..protocol.splice import SplicedBody
from .metadata_topics import TopicEntries
from .registry import CLUSTER, OPERATIONS_UNSET, RequestContext, api

log = logging.getLogger(__name__)


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


# A topic answered: known (the image's TopicInfo) or not, (error code, name, topic id).
Answer = TopicInfo | tuple[int, "str | None", Any]


@api(key=3, versions=(0, 12))
async def metadata(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    requested = req.topics
    if ctx.version == 0 and not requested:
        requested = None
    elif requested is not None:
        # Each topic answered once, as Kafka's handler takes the names as a set: a request
        # naming one topic a million times costs one answer, not a million.
        requested = list({(t.name, getattr(t, "topic_id", None)): t for t in requested}.values())
    answers: list[Answer]
    if requested is None:
        image = broker.image
        answers = [t for t in image.topics.values()
                   if ctx.authorized("DESCRIBE", "TOPIC", t.name, quiet=True)]
    else:
        image, answers = await _named(ctx, req, requested)
    entries = TopicEntries(broker.metadata.topic_memo,
                           response_schema(ctx.header.api_key, ctx.version), image)
    with_operations = getattr(req, "include_topic_authorized_operations", False)
    topics = [entries.error(*a) if isinstance(a, tuple) else entries.known(
                  a, ctx.authorized_operations("TOPIC", a.name) if with_operations else None)
              for a in answers]
    brokers = [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
               for b, host, port in image.brokers_for(ctx.session.listener_name)]
    return SplicedBody(ctx.response({
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": broker.cluster_id,
        # As KRaft brokers do: the node asked, which relays controller requests. A client
        # routing by it never chases a controller that died a moment ago.
        "controller_id": broker.node_id,
        "topics": (),
        "cluster_authorized_operations": ctx.authorized_operations("CLUSTER", CLUSTER)
        if getattr(req, "include_cluster_authorized_operations", False) else OPERATIONS_UNSET,
    }), "topics", topics)


async def _named(ctx: RequestContext, req: Any, requested: list[Any]
                 ) -> tuple[MetadataImage, list[Answer]]:
    """The image to answer from and the answer for each requested topic, auto-creating
    the missing ones when the request and the config allow it."""
    broker = ctx.broker
    image: MetadataImage = broker.image
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
    answers: list[Answer] = []
    for t in requested:
        name = t.name
        topic_id = getattr(t, "topic_id", None)
        if name is None and topic_id is not None:
            name = image.topic_names.get(topic_id)
            if name is None:
                answers.append((errors.UnknownTopicId.code, None, topic_id))
                continue
        info = image.topics.get(name) if name is not None else None
        if name is not None and not ctx.authorized("DESCRIBE", "TOPIC", name):
            answers.append((errors.TopicAuthorizationFailed.code, name, topic_id))
        elif info is None:
            # Asked to create it, it is not here yet (being created, or created and not yet
            # applied on this node): LEADER_NOT_AVAILABLE, as Kafka answers for a topic it
            # has just auto-created, so the client asks again instead of giving up.
            code = (errors.LeaderNotAvailable.code if name in being_created
                    else errors.UnknownTopicOrPartition.code if _valid_name(name or "")
                    else errors.InvalidTopicException.code)
            answers.append((code, name, topic_id))
        else:
            answers.append(info)
    return image, answers
