"""The internal topics coordinators live in (__consumer_offsets, __transaction_state):
created on first use, and the leader of a key's partition named as its coordinator.

Thread safety: event loop only; `ensure` serialises creation under the caller's lock.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ..controller.topics import TopicSpec
from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors
from .host import CoordinatorHost
from .records import group_partition

log = logging.getLogger(__name__)


@dataclass
class InternalTopic:
    """One internal topic: its name, size, wanted replication factor and configs.

    With ``cap_at_live`` the replication factor is capped at the live brokers (a single node
    still serves groups) and min.insync.replicas at the replication factor. Without it, as
    Kafka does for __transaction_state, fewer live brokers than the replication factor refuse
    the creation: COORDINATOR_NOT_AVAILABLE (retriable: the client asks again as brokers join)
    with a message naming the setting."""
    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    rf_config: str          # the broker config naming the replication factor, for the log
    min_isr: int | None = None
    cap_at_live: bool = True
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ensure(self, host: CoordinatorHost) -> None:
        """Create the topic when it is first needed (compacted, internal)."""
        if self.name in host.image.topics:
            return
        async with self._lock:
            image = host.image
            if self.name in image.topics:
                return
            live = len(image.live_brokers)
            if not self.cap_at_live and live < self.replication_factor:
                raise errors.CoordinatorNotAvailable(
                    f"cannot create {self.name}: replication factor {self.replication_factor} "
                    f"({self.rf_config}) is larger than the {live} live broker(s)")
            rf = max(1, min(self.replication_factor, live))
            if rf < self.replication_factor:
                log.warning("creating %s with replication factor %d: only %d live broker(s), "
                            "%s is %d", self.name, rf, live, self.rf_config,
                            self.replication_factor)
            configs = dict(self.configs)
            if self.min_isr is not None:
                configs["min.insync.replicas"] = str(min(self.min_isr, rf))
            spec = TopicSpec(self.name, self.num_partitions, rf, configs=configs)
            assert host.channel is not None
            [result] = await host.channel.create_topics([spec])
            if result.error is not None and not isinstance(result.error,
                                                           errors.TopicAlreadyExists):
                raise errors.CoordinatorNotAvailable(f"cannot create {self.name}: {result.error}")
            log.info("created %s with %d partitions, replication factor %d", self.name,
                     spec.num_partitions, rf)


def coordinator_address(image: MetadataImage, topic: str, partition: int, key: str,
                        listener_name: str | None) -> tuple[int, str, int]:
    """(node id, host, port) of the leader of ``topic``-``partition``, the coordinator of
    ``key``, as a client of listener ``listener_name`` reaches it."""
    part = image.partition(topic, partition)
    if part is None or part.leader not in image.brokers:
        raise errors.CoordinatorNotAvailable(f"no leader for the {topic} partition of {key!r}")
    b = image.brokers[part.leader]
    address = b.address(listener_name) if listener_name else (b.host, b.port)
    if address is None:
        raise errors.CoordinatorNotAvailable(
            f"the coordinator of {key!r}, broker {b.node_id}, has no {listener_name} listener")
    return b.node_id, *address


def partition_count(image: MetadataImage, topic: str, configured: int) -> int:
    """Internal ``topic``'s partitions: as created once it exists, as configured before."""
    existing = image.topics.get(topic)
    return len(existing.partitions) if existing is not None else configured


def partition_of(image: MetadataImage, topic: str, key: str, configured: int) -> int:
    """The partition of ``key`` (a group or transactional id) in internal ``topic``."""
    return group_partition(key, partition_count(image, topic, configured))


def led_partition(image: MetadataImage, topic: str, key: str, configured: int, node_id: int,
                  role: str) -> tuple[int, PartitionInfo]:
    """(partition, its metadata) of ``key`` when this node leads it, else NOT_COORDINATOR,
    which sends the client back to FindCoordinator.

    A client sent here by another node's newer view (it named this node coordinator once
    the topic was created) can meet this node before it applied the topic: as far as this
    node knows it is not the coordinator, and NOT_COORDINATOR (not COORDINATOR_NOT_AVAILABLE,
    which some clients treat as fatal here) makes the client look again."""
    if topic not in image.topics:
        raise errors.NotCoordinator(f"{topic} is not in node {node_id}'s metadata yet")
    p = partition_of(image, topic, key, configured)
    part = image.partition(topic, p)
    if part is None or part.leader != node_id:
        raise errors.NotCoordinator(f"node {node_id} is not the {role} {key!r}")
    return p, part
