"""Choosing the replica a consumer reads from (KIP-392), on hand-built images."""
from __future__ import annotations

import uuid

from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.replication.read_replica import NO_REPLICA, ConsumerFetchCounters, \
    select_read_replica

RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def _image(replicas: list[int], isr: list[int], leader: int, fenced: tuple[int, ...] = ()
           ) -> MetadataImage:
    tid = str(uuid.uuid4())
    recs: list[dict] = [{"type": r.REGISTER_BROKER, "node_id": b, "host": "127.0.0.1",
                         "port": 9000 + b, "rack": rack, "fenced": b in fenced}
                        for b, rack in RACKS.items()]
    recs += [{"type": r.TOPIC, "name": "t", "topic_id": tid},
             {"type": r.PARTITION, "topic_id": tid, "partition": 0, "replicas": replicas,
              "isr": isr, "leader": leader, "leader_epoch": 0}]
    return replay(MetadataImage(cluster_id="c"), recs, 0)


def _select(image: MetadataImage, rack: str, ends: dict[int, int], offset: int = 10) -> int:
    return select_read_replica(image, image.partition("t", 0), rack, ends, offset)


def test_a_consumer_in_a_followers_rack_is_sent_to_that_follower() -> None:
    image = _image([1, 2, 3], [1, 2, 3], 1)
    assert _select(image, "b", {2: 10, 3: 10}) == 2
    assert _select(image, "c", {2: 10, 3: 12}) == 3


def test_the_leader_serves_when_it_shares_the_rack_or_nobody_fits() -> None:
    image = _image([1, 2, 3], [1, 3], 1)
    assert _select(image, "a", {2: 10, 3: 10}) == NO_REPLICA      # leader's own rack
    assert _select(image, "", {2: 10, 3: 10}) == NO_REPLICA       # no rack given
    assert _select(image, "b", {2: 10, 3: 10}) == NO_REPLICA      # 2 is out of the ISR
    assert _select(image, "c", {3: 9}) == NO_REPLICA              # 3 lacks the offset
    fenced = _image([1, 2, 3], [1, 2, 3], 1, fenced=(2,))
    assert _select(fenced, "b", {2: 10}) == NO_REPLICA


def test_of_two_followers_in_the_rack_the_one_furthest_ahead() -> None:
    image = _image([1, 2, 4], [1, 2, 4], 1)
    assert _select(image, "b", {2: 10, 4: 11}) == 4
    assert _select(image, "b", {2: 11, 4: 11}) == 2


def test_counters_count_by_role() -> None:
    counters = ConsumerFetchCounters()
    counters.count(("t", 0), "follower", 100, "b")
    counters.count(("t", 0), "leader", 0, "")
    assert counters.fetches == {"leader": 1, "follower": 1}
    assert counters.bytes == {"leader": 0, "follower": 100}
