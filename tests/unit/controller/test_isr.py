"""controller/isr.py: a leader's batch of ISR changes, decided partition by partition, on
hand-built images."""
from __future__ import annotations

from typing import Any

from rillet.controller import isr
from rillet.controller.isr import IsrChange
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.protocol import errors

TIDS = {"a": "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11", "b": "0b5e3e55-8c2f-4d7e-9c3a-1f2e3d4c5b6a"}
PARTITIONS = 4


def _image(fenced: tuple[int, ...] = ()) -> MetadataImage:
    """Brokers 1-4; topics a and b, 4 partitions each, replicas (1, 2, 3), ISR (1, 2), led
    by 1 in leader epoch 5, partition epoch 9."""
    recs: list[dict[str, Any]] = [
        {"type": r.REGISTER_BROKER, "node_id": b, "host": "127.0.0.1", "port": 9000 + b,
         "rack": None} for b in (1, 2, 3, 4)]
    for name, tid in TIDS.items():
        recs.append({"type": r.TOPIC, "name": name, "topic_id": tid})
        recs += [{"type": r.PARTITION, "topic_id": tid, "partition": p, "replicas": [1, 2, 3],
                  "isr": [1, 2], "leader": 1, "leader_epoch": 5, "partition_epoch": 9}
                 for p in range(PARTITIONS)]
    recs += [{"type": r.FENCE_BROKER, "node_id": b} for b in fenced]
    return replay(MetadataImage("c"), recs, 0)


def _grow(topic: str, p: int, leader_epoch: int = 5, partition_epoch: int = 9,
          new_isr: tuple[int, ...] = (1, 2, 3)) -> IsrChange:
    return IsrChange(topic, p, leader_epoch, partition_epoch, new_isr)


def test_a_batch_over_topics_becomes_one_record_per_accepted_partition() -> None:
    image = _image()
    changes = [_grow(t, p) for t in ("a", "b") for p in range(PARTITIONS)]
    answers, records = isr.decide(image, 1, changes)
    assert answers == [None] * len(changes)
    assert len(records) == len(changes)
    after = replay(image, records, 1)
    for c in changes:
        part = after.partition(c.topic, c.partition)
        assert part is not None and part.isr == (1, 2, 3) and part.partition_epoch == 10


def test_each_partition_is_answered_on_its_own() -> None:
    image = _image(fenced=(3,))
    changes = [
        _grow("a", 0),                              # 3 would join, but it is fenced
        _grow("a", 1, leader_epoch=4),              # a leader of an older epoch
        _grow("a", 2, partition_epoch=8),           # decided from stale partition state
        IsrChange("a", 3, 5, 9, (1,)),              # a shrink: always allowed
        IsrChange("b", 0, 5, 9, (2, 3)),            # without its leader
        IsrChange("b", 1, 5, 9, (1, 4)),            # 4 is no replica
        IsrChange("nope", 0, 5, 9, (1, 2)),         # no such topic
        IsrChange("b", 9, 5, 9, (1, 2)),            # no such partition
        IsrChange("b", 2, 5, 9, (1, 2, 2)),         # a replica twice
    ]
    answers, records = isr.decide(image, 1, changes)
    kinds = [type(a) if a is not None else None for a in answers]
    assert kinds == [errors.IneligibleReplica, errors.FencedLeaderEpoch,
                     errors.InvalidUpdateVersion, None, errors.InvalidRequest,
                     errors.InvalidRequest, errors.UnknownTopicOrPartition,
                     errors.UnknownTopicOrPartition, errors.InvalidRequest]
    # Only the shrink of a-3 is written.
    assert [(rec["partition"], rec["isr"]) for rec in records] == [(3, [1])]


def test_another_leader_is_refused_with_fenced_leader_epoch() -> None:
    answers, records = isr.decide(_image(), 2, [_grow("a", 0)])
    assert isinstance(answers[0], errors.FencedLeaderEpoch) and records == []


def test_a_fenced_broker_already_in_the_isr_may_stay() -> None:
    """Only joiners must be live: a shrink that keeps a fenced member is not refused."""
    image = _image(fenced=(2,))
    answers, records = isr.decide(image, 1, [IsrChange("a", 0, 5, 9, (1, 2))])
    assert answers == [None] and len(records) == 1


def test_a_partition_named_twice_is_refused_the_second_time() -> None:
    answers, records = isr.decide(_image(), 1, [_grow("a", 0), IsrChange("a", 0, 5, 9, (1,))])
    assert answers[0] is None and isinstance(answers[1], errors.InvalidRequest)
    assert len(records) == 1 and records[0]["isr"] == [1, 2, 3]


def test_an_empty_batch_decides_nothing() -> None:
    assert isr.decide(_image(), 1, []) == ([], [])


def test_the_summary_counts_and_names_refusals() -> None:
    changes = [_grow("a", p) for p in range(3)]
    answers = [None, errors.InvalidUpdateVersion("x"), None]
    assert isr.summary(changes, answers) == "2 accepted, 1 refused (a-1: InvalidUpdateVersion)"
    many = [_grow("a", p) for p in range(PARTITIONS)] * 2
    text = isr.summary(many, [errors.FencedLeaderEpoch("x")] * len(many))
    assert text.startswith("0 accepted, 8 refused (") and text.endswith(", 3 more)")
