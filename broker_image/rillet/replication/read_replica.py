"""Fetching from the closest replica (KIP-392): which replica serves a consumer's fetch.

With replica.selector.class = RackAwareReplicaSelector, a leader answering a consumer
that names its rack (Fetch v11+ rack_id, the client's client.rack) in another rack
points it, through preferred_read_replica, to an in-sync follower in the consumer's
rack that already holds the fetch offset; the consumer then fetches there. A follower
serves consumers (v11+, which can be redirected back) up to the high watermark it
knows, never beyond, so a consumer reads nothing the leader has not committed.

`ConsumerFetchCounters` counts what each role served to consumers (not replicas): a
plain object, to be exported as metrics; the log reports the first follower read of
each partition so tests and operators see where consumers read.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Protocol

from ..defs.broker_defs import RACK_AWARE_SELECTOR
from ..metadata.image import MetadataImage, PartitionInfo
from ..metadata.view import MetadataView
from ..protocol import errors
from ..storage.log import PartitionLog
from ..storage.manager import LogManager
from .leader import PartitionLeaderState

log = logging.getLogger(__name__)

NO_REPLICA = -1
# The first Fetch version whose consumers send their rack and follow preferred_read_replica.
FOLLOWER_FETCH_VERSION = 11

TopicPartition = tuple[str, int]


@dataclass
class ConsumerFetchCounters:
    """Consumer fetches this broker answered, by role. Event loop only."""
    fetches: dict[str, int] = field(default_factory=lambda: {"leader": 0, "follower": 0})
    bytes: dict[str, int] = field(default_factory=lambda: {"leader": 0, "follower": 0})
    redirected: int = 0    # answers naming a preferred read replica instead of records
    _announced: set[TopicPartition] = field(default_factory=set)

    def count(self, tp: TopicPartition, role: str, nbytes: int, rack: str) -> None:
        self.fetches[role] += 1
        self.bytes[role] += nbytes
        if role == "follower" and nbytes and tp not in self._announced:
            self._announced.add(tp)
            log.info("%s-%d: serving consumer fetches as a follower (client rack %r)",
                     tp[0], tp[1], rack)


def select_read_replica(image: MetadataImage, part: PartitionInfo, client_rack: str,
                        follower_ends: Mapping[int, int], fetch_offset: int) -> int:
    """The follower a consumer in `client_rack` should read from, or NO_REPLICA (the leader).

    Like Kafka's RackAwareReplicaSelector: the leader when it shares the consumer's rack
    or no in-sync live replica of that rack holds `fetch_offset` yet; else the one of
    them furthest ahead (lowest id on a tie)."""
    if not client_rack:
        return NO_REPLICA
    leader = image.brokers.get(part.leader)
    if leader is None or leader.rack == client_rack:
        return NO_REPLICA
    live = image.live_broker_ids
    candidates = [(follower_ends.get(r, -1), -r) for r in part.isr
                  if r != part.leader and r in live and image.brokers[r].rack == client_rack
                  and follower_ends.get(r, -1) >= fetch_offset]
    return -max(candidates)[1] if candidates else NO_REPLICA


class HostedReplicas(Protocol):
    """What a consumer fetch's read source is chosen from: the replica manager."""
    node_id: int
    metadata: MetadataView
    logs: LogManager
    leaders: dict[TopicPartition, PartitionLeaderState]

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1
                         ) -> tuple[PartitionInfo, PartitionLog]: ...


@dataclass(frozen=True)
class ReadSource:
    """Where a consumer fetch of one partition is read here: the log, and in which role."""
    part: PartitionInfo
    plog: PartitionLog
    role: str               # "leader" or "follower"
    preferred: int = NO_REPLICA


def consumer_read_source(replicas: HostedReplicas, selector: str, topic: str, partition: int,
                         current_leader_epoch: int, version: int, rack_id: str,
                         fetch_offset: int) -> ReadSource:
    """The log a consumer fetch reads here, or the Kafka error it gets. `selector`: the
    broker's replica.selector.class."""
    image = replicas.metadata.image
    part = image.partition(topic, partition)
    leads = part is not None and part.leader == replicas.node_id
    if part is None or leads or version < FOLLOWER_FETCH_VERSION \
            or replicas.node_id not in part.replicas:
        part, plog = replicas.leader_partition(topic, partition, current_leader_epoch)
        return ReadSource(part, plog, "leader",
                          _preferred(replicas, selector, image, topic, part, rack_id,
                                     fetch_offset))
    _check_epoch(topic, part, current_leader_epoch)
    plog = replicas.logs.get(topic, partition)
    if plog is None:
        raise errors.NotLeaderOrFollower(f"log of {topic}-{partition} is not loaded here")
    return ReadSource(part, plog, "follower")


def _preferred(replicas: HostedReplicas, selector: str, image: MetadataImage, topic: str,
               part: PartitionInfo, rack_id: str, fetch_offset: int) -> int:
    if selector != RACK_AWARE_SELECTOR or not rack_id:
        return NO_REPLICA
    state = replicas.leaders.get((topic, part.partition))
    if state is None:
        return NO_REPLICA
    ends = {r: p.log_end_offset for r, p in state.followers.items()}
    return select_read_replica(image, part, rack_id, ends, fetch_offset)


def _check_epoch(topic: str, part: PartitionInfo, epoch: int) -> None:
    """A follower checks a consumer's leader epoch like the leader does."""
    if epoch < 0 or epoch == part.leader_epoch:
        return
    if epoch > part.leader_epoch:
        raise errors.UnknownLeaderEpoch(
            f"{topic}-{part.partition}: client epoch {epoch} is newer than {part.leader_epoch}")
    raise errors.FencedLeaderEpoch(
        f"{topic}-{part.partition}: client epoch {epoch} is older than {part.leader_epoch}")

