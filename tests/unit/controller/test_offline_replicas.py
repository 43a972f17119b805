"""controller/offline_replicas.py: a live broker's replicas on a failed log dir lose their
leadership and ISR slots, partition by partition, on hand-built images."""
from __future__ import annotations

from typing import Any

from rillet.controller import offline_replicas
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.protocol import errors

TID = "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11"


def _image() -> MetadataImage:
    """Brokers 1-4, topic a: a-0..a-2 replicas (1, 2, 3) ISR (1, 2) led by 1; a-3 ISR (1)
    alone; a-4 on (2, 3, 4), led by 2."""
    recs: list[dict[str, Any]] = [
        {"type": r.REGISTER_BROKER, "node_id": b, "host": "127.0.0.1", "port": 9000 + b,
         "rack": None} for b in (1, 2, 3, 4)]
    recs.append({"type": r.TOPIC, "name": "a", "topic_id": TID})
    for p, replicas, isr, leader in [(0, [1, 2, 3], [1, 2], 1), (1, [1, 2, 3], [1, 2], 1),
                                     (2, [1, 2, 3], [2, 1], 2), (3, [1, 2, 3], [1], 1),
                                     (4, [2, 3, 4], [2, 3], 2)]:
        recs.append({"type": r.PARTITION, "topic_id": TID, "partition": p,
                     "replicas": replicas, "isr": isr, "leader": leader, "leader_epoch": 5,
                     "partition_epoch": 9})
    return replay(MetadataImage("c"), recs, 0)


def test_only_the_named_partitions_move_off_the_broker() -> None:
    image = _image()
    answers, records = offline_replicas.decide(image, 1, [("a", 0), ("a", 2)], lambda t: False)
    assert answers == {("a", 0): None, ("a", 2): None}
    after = replay(image, records, 1)
    moved = after.partition("a", 0)
    assert moved is not None and (moved.leader, moved.isr) == (2, (2,))
    assert moved.leader_epoch == 6
    follower = after.partition("a", 2)   # led by 2 already: it only leaves the ISR
    assert follower is not None and (follower.leader, follower.isr) == (2, (2,))
    assert follower.leader_epoch == 5
    untouched = after.partition("a", 1)  # another dir of broker 1: it keeps leading
    assert untouched is not None and (untouched.leader, untouched.isr) == (1, (1, 2))


def test_a_partition_with_no_other_in_sync_replica_is_left_without_a_leader() -> None:
    image = _image()
    _, records = offline_replicas.decide(image, 1, [("a", 3)], lambda t: False)
    part = replay(image, records, 1).partition("a", 3)
    # Its ISR stays: only broker 1 holds every acknowledged record (no unclean election).
    assert part is not None and (part.leader, part.isr) == (-1, (1,))
    _, records = offline_replicas.decide(image, 1, [("a", 3)], lambda t: True)
    part = replay(image, records, 1).partition("a", 3)
    assert part is not None and part.leader in (2, 3) and part.isr == (part.leader,)


def test_unknown_partitions_and_foreign_replicas_are_answered_each() -> None:
    answers, records = offline_replicas.decide(_image(), 1, [("a", 4), ("a", 9), ("b", 0)],
                                               lambda t: False)
    assert records == []
    assert isinstance(answers[("a", 4)], errors.NotLeaderOrFollower)
    assert isinstance(answers[("a", 9)], errors.UnknownTopicOrPartition)
    assert isinstance(answers[("b", 0)], errors.UnknownTopicOrPartition)
