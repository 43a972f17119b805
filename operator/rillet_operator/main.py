"""Kopf entry points: `kopf run -m rillet_operator.main [--all-namespaces | -n NS ...]`.

Every handler is the same level-based reconcile (create, update, resume, timer), so a missed
event, an operator restart or someone else's edit is fixed on the next pass.
"""
from __future__ import annotations

import os
import random
from typing import Any

import kopf

from .builders.names import GROUP, VERSION
from . import logs
from .handlers import cluster, topic, user

CLUSTER_INTERVAL_S = float(os.environ.get("RILLET_CLUSTER_INTERVAL", "10"))
TOPIC_INTERVAL_S = float(os.environ.get("RILLET_TOPIC_INTERVAL", "10"))
CLUSTERS = (GROUP, VERSION, "clusters")
TOPICS = (GROUP, VERSION, "topics")
USERS = (GROUP, VERSION, "users")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # The chart's logLevel (RILLET_LOG_LEVEL): Kopf has set up its handler by now.
    logs.configure_from_env()
    # Peering (--peering NAME on the command line): Kopf pauses every operator that sees a
    # peer of the same or higher priority, so equal priorities would pause both replicas.
    # A random priority per process makes exactly one (the highest) active; the standby
    # resumes when the active one's peering record expires (settings.peering.lifetime).
    settings.peering.priority = int(os.environ.get("RILLET_PEERING_PRIORITY")
                                    or random.randrange(1, 2**31))
    settings.posting.level = 20  # INFO and above become Events
    settings.watching.server_timeout = 60
    settings.persistence.finalizer = "rillet.io/finalizer"
    # Handler progress in annotations under rillet.io, not in status (status is ours).
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="rillet.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="rillet.io", key="last-handled-configuration")


@kopf.on.resume(*CLUSTERS)
@kopf.on.create(*CLUSTERS)
@kopf.on.update(*CLUSTERS)
async def cluster_changed(**kwargs: Any) -> None:
    await cluster.reconcile(**kwargs)


@kopf.timer(*CLUSTERS, interval=CLUSTER_INTERVAL_S, initial_delay=CLUSTER_INTERVAL_S)
async def cluster_timer(**kwargs: Any) -> None:
    await cluster.reconcile(**kwargs)


@kopf.on.delete(*CLUSTERS)
async def cluster_deleted(**kwargs: Any) -> None:
    await cluster.delete(**kwargs)


@kopf.on.resume(*TOPICS)
@kopf.on.create(*TOPICS)
@kopf.on.update(*TOPICS)
async def topic_changed(**kwargs: Any) -> None:
    await topic.reconcile(**kwargs)


@kopf.timer(*TOPICS, interval=TOPIC_INTERVAL_S, initial_delay=TOPIC_INTERVAL_S)
async def topic_timer(**kwargs: Any) -> None:
    await topic.reconcile(**kwargs)


@kopf.on.delete(*TOPICS)
async def topic_deleted(**kwargs: Any) -> None:
    await topic.delete(**kwargs)


@kopf.on.resume(*USERS)
@kopf.on.create(*USERS)
@kopf.on.update(*USERS)
async def user_changed(**kwargs: Any) -> None:
    await user.reconcile(**kwargs)


@kopf.timer(*USERS, interval=TOPIC_INTERVAL_S, initial_delay=TOPIC_INTERVAL_S)
async def user_timer(**kwargs: Any) -> None:
    await user.reconcile(**kwargs)


@kopf.on.delete(*USERS)
async def user_deleted(**kwargs: Any) -> None:
    await user.delete(**kwargs)
