"""Replication throttles (KIP-73): which replicas this broker throttles, and its two quotas.

Kafka's rules, as its ReplicationQuotaManager applies them:

- Leader side: partition p of topic t is throttled here when t's
  ``leader.replication.throttled.replicas`` names ``p:<this broker>`` or is ``*``. While
  the leader quota (``leader.replication.throttled.rate``) is exceeded, a follower fetch
  of a throttled partition gets no records, unless that follower is in the ISR: in-sync
  replicas are never held back, so a throttle cannot stall acks=all or shrink the ISR.
  Every byte served for a throttled partition counts, in-sync followers' too.
- Follower side: ``follower.replication.throttled.replicas`` naming ``p:<this broker>``
  (or ``*``): while the follower quota (``follower.replication.throttled.rate``) is
  exceeded the partition is left out of this broker's fetch requests, unless the replica
  has caught up (its log end reached the leader's high watermark at the last fetch).
  Bytes fetched for throttled partitions count.

Throttled partitions are skipped, never waited for, so unthrottled partitions fetched
in the same request are not held back. Owned by the ReplicaManager; event loop only.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..metadata.delta import MetadataDelta
from ..metadata.image import TOPIC_RESOURCE
from ..quotas.rate import RateQuota

TopicPartition = tuple[str, int]
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALL = "*"


def throttled_partitions(value: str | None, node_id: int) -> frozenset[int] | str:
    """The partitions a throttled-replicas config value throttles on `node_id`, or ALL."""
    items = [item.strip() for item in (value or "").split(",") if item.strip()]
    if items == [ALL]:
        return ALL
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if partition.isdigit() and broker.isdigit() and int(broker) == node_id:
            out.add(int(partition))
    return frozenset(out)


class SideThrottle:
    """One side's quota and throttled partitions (see the module doc for the rules)."""

    def __init__(self, replicas_key: str, rate_key: str, node_id: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.replicas_key = replicas_key
        self.rate_key = rate_key
        self.node_id = node_id
        self.quota = RateQuota()
        self._clock = clock
        self._throttled: dict[str, frozenset[int] | str] = {}

    def configure(self, config: Any) -> None:
        """Rate and window from the broker's (dynamic) config; recorded bytes are kept."""
        samples = config["replication.quota.window.num"]
        window_s = float(config["replication.quota.window.size.seconds"])
        if (samples, window_s) != (self.quota.samples, self.quota.window_s):
            self.quota = RateQuota(config[self.rate_key], samples, window_s)
        self.quota.bound = config[self.rate_key]

    def update_topics(self, topic_configs: Mapping[str, Mapping[str, str]]) -> None:
        """The overrides of topics whose configs changed (empty: none left, or deleted)."""
        for topic, overrides in topic_configs.items():
            parts = throttled_partitions(overrides.get(self.replicas_key), self.node_id)
            if parts:
                self._throttled[topic] = parts
            else:
                self._throttled.pop(topic, None)

    def is_throttled(self, tp: TopicPartition) -> bool:
        parts = self._throttled.get(tp[0])
        return parts is not None and (parts == ALL or tp[1] in parts)

    def holds_back(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Skip `tp` in this fetch: throttled, not in sync, and over quota."""
        return (not in_sync and not self.quota.unlimited and self.is_throttled(tp)
                and self.quota.exceeded(self._clock()))

    def record(self, tp: TopicPartition, nbytes: int) -> None:
        if nbytes and not self.quota.unlimited and self.is_throttled(tp):
            self.quota.record(nbytes, self._clock())


class ReplicationThrottles:
    """The leader and follower throttles of one broker, kept in step with the metadata."""

    def __init__(self, node_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = SideThrottle(LEADER_REPLICAS, LEADER_RATE, node_id, clock)
        self.follower = SideThrottle(FOLLOWER_REPLICAS, FOLLOWER_RATE, node_id, clock)
        self._config: Any = None

    def update(self, delta: MetadataDelta, config: Any) -> None:
        """After a metadata step: the rates (broker config) and the lists of the topics
        whose configs the step changed (the delta names them; no walk over every config)."""
        if config is not self._config:
            self._config = config
            self.leader.configure(config)
            self.follower.configure(config)
        topics = {name: cfg for (rtype, name), cfg in delta.configs.items()
                  if rtype == TOPIC_RESOURCE}
        if topics:
            self.leader.update_topics(topics)
            self.follower.update_topics(topics)
