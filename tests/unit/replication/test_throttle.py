"""Which replicas a broker throttles (KIP-73 lists) and when it holds them back."""
from __future__ import annotations

from types import MappingProxyType

from rillet.defs.broker_config import BrokerConfig
from rillet.metadata.image import TOPIC_RESOURCE, MetadataImage
from rillet.replication.throttle import ALL, ReplicationThrottles, throttled_partitions


def test_throttled_partitions_pick_this_broker() -> None:
    assert throttled_partitions("0:1, 1:2,2:1", node_id=1) == {0, 2}
    assert throttled_partitions("0:1,1:2", node_id=3) == frozenset()
    assert throttled_partitions("*", node_id=7) == ALL
    assert throttled_partitions("", node_id=1) == frozenset()
    assert throttled_partitions(None, node_id=1) == frozenset()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _image(topic_configs: dict[str, dict[str, str]]) -> MetadataImage:
    return MetadataImage(cluster_id="c", configs=MappingProxyType(
        {(TOPIC_RESOURCE, t): MappingProxyType(c) for t, c in topic_configs.items()}))


def _throttles(clock: Clock, **rates: str) -> tuple[ReplicationThrottles, BrokerConfig]:
    config = BrokerConfig.load(overrides={"node.id": "1", "replication.quota.window.num": "2",
                                          **rates})
    return ReplicationThrottles(1, clock), config


def test_leader_holds_back_only_throttled_out_of_sync_replicas_over_quota() -> None:
    clock = Clock()
    throttles, config = _throttles(clock, **{"leader.replication.throttled.rate": "100"})
    throttles.update(_image({"t": {"leader.replication.throttled.replicas": "0:1,1:2"},
                             "u": {}}), config)
    leader = throttles.leader
    assert leader.is_throttled(("t", 0)) and not leader.is_throttled(("t", 1))
    assert not leader.is_throttled(("u", 0))
    assert not leader.holds_back(("t", 0), in_sync=False)   # nothing sent yet
    leader.record(("t", 0), 1000)
    leader.record(("u", 0), 10**9)   # unthrottled bytes do not count
    assert leader.holds_back(("t", 0), in_sync=False)
    assert not leader.holds_back(("t", 0), in_sync=True)     # the ISR is never throttled
    assert not leader.holds_back(("t", 1), in_sync=False)
    assert not leader.holds_back(("u", 0), in_sync=False)
    clock.now = 5.0   # the window passed
    assert not leader.holds_back(("t", 0), in_sync=False)


def test_follower_side_uses_its_own_list_and_rate() -> None:
    clock = Clock()
    throttles, config = _throttles(clock, **{"follower.replication.throttled.rate": "10"})
    throttles.update(_image({"t": {"follower.replication.throttled.replicas": "*",
                                   "leader.replication.throttled.replicas": "*"}}), config)
    throttles.follower.record(("t", 3), 100)
    assert throttles.follower.holds_back(("t", 3), in_sync=False)
    # The leader rate is unlimited: the leader side never holds back.
    throttles.leader.record(("t", 3), 10**9)
    assert not throttles.leader.holds_back(("t", 3), in_sync=False)


def test_removing_the_list_or_the_rate_lifts_the_throttle() -> None:
    clock = Clock()
    throttles, config = _throttles(clock, **{"follower.replication.throttled.rate": "10"})
    throttles.update(_image({"t": {"follower.replication.throttled.replicas": "*"}}), config)
    throttles.follower.record(("t", 0), 100)
    assert throttles.follower.holds_back(("t", 0), in_sync=False)
    throttles.update(_image({}), config)
    assert not throttles.follower.holds_back(("t", 0), in_sync=False)
    throttles.update(_image({"t": {"follower.replication.throttled.replicas": "*"}}), config)
    assert throttles.follower.holds_back(("t", 0), in_sync=False)
    unlimited = BrokerConfig.load(overrides={"node.id": "1",
                                             "replication.quota.window.num": "2"})
    throttles.update(_image({"t": {"follower.replication.throttled.replicas": "*"}}),
                     unlimited)
    assert not throttles.follower.holds_back(("t", 0), in_sync=False)
