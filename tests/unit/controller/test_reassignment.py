"""controller/reassignment.py: starting, completing and cancelling partition moves (KIP-455),
on hand-built images, with property tests over random moves and ISRs."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.controller import reassignment as ra
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, PartitionInfo, replay
from rillet.metadata.snapshot import image_records
from rillet.protocol import errors

TID = "6f1e5a52-2d0b-4d53-9a0c-3c2d8f0b9e11"
BROKERS = range(1, 7)


def _image(replicas: list[int], isr: list[int] | None = None, leader: int | None = None,
           fenced: tuple[int, ...] = ()) -> MetadataImage:
    isr = list(replicas) if isr is None else isr
    recs: list[dict[str, Any]] = [
        {"type": r.REGISTER_BROKER, "node_id": b, "host": "127.0.0.1", "port": 9000 + b,
         "rack": None} for b in BROKERS]
    recs += [{"type": r.TOPIC, "name": "t", "topic_id": TID},
             {"type": r.PARTITION, "topic_id": TID, "partition": 0, "replicas": replicas,
              "isr": isr, "leader": replicas[0] if leader is None else leader,
              "leader_epoch": 5, "partition_epoch": 9}]
    recs += [{"type": r.FENCE_BROKER, "node_id": b} for b in fenced]
    return replay(MetadataImage("c"), recs, 0)


def _apply(image: MetadataImage, record: dict[str, Any] | None) -> MetadataImage:
    return image if record is None else replay(image, [record], image.offset + 1)


def _part(image: MetadataImage) -> PartitionInfo:
    part = image.partition("t", 0)
    assert part is not None
    return part


def _expand_isr(image: MetadataImage, isr: list[int]) -> MetadataImage:
    part = _part(image)
    return _apply(image, ra.with_isr(part, tuple(isr), image.live_broker_ids))


# -- starting ---------------------------------------------------------------------------------

def test_start_puts_the_target_first_and_marks_adding_and_removing() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [3, 4, 5]))
    part = _part(image)
    assert part.replicas == (3, 4, 5, 1, 2)
    assert part.adding == (4, 5) and part.removing == (1, 2)
    assert part.isr == (1, 2, 3) and part.leader == 1
    assert part.leader_epoch == 5            # nothing left the replica set yet
    assert part.partition_epoch == 10
    assert list(ra.ongoing(image)) == [ra.Ongoing("t", 0, (3, 4, 5, 1, 2), (4, 5), (1, 2))]


def test_a_move_to_the_current_replicas_is_a_no_op() -> None:
    assert ra.decide(_image([1, 2, 3]), "t", 0, [1, 2, 3]) is None


def test_a_reorder_or_a_shrink_within_the_isr_completes_at_once() -> None:
    image = _image([1, 2, 3])
    reordered = _apply(image, ra.decide(image, "t", 0, [3, 2, 1]))
    assert _part(reordered).replicas == (3, 2, 1) and not ra.is_reassigning(_part(reordered))
    shrunk = _apply(image, ra.decide(image, "t", 0, [2, 3]))
    part = _part(shrunk)
    assert (part.replicas, part.isr, part.leader) == ((2, 3), (2, 3), 2)
    assert part.leader_epoch == 6 and not ra.is_reassigning(part)


@pytest.mark.parametrize("target, why", [
    ([], "empty"), ([1, 1, 2], "more than once"), ([1, 2, 9], "not registered")])
def test_invalid_targets_are_refused(target: list[int], why: str) -> None:
    with pytest.raises(errors.InvalidReplicaAssignment, match=why):
        ra.decide(_image([1, 2, 3]), "t", 0, target)


def test_unknown_partitions_and_cancels_without_a_move_are_refused() -> None:
    image = _image([1, 2, 3])
    with pytest.raises(errors.UnknownTopicOrPartition):
        ra.decide(image, "nope", 0, [1])
    with pytest.raises(errors.UnknownTopicOrPartition):
        ra.decide(image, "t", 7, [1])
    with pytest.raises(errors.NoReassignmentInProgress):
        ra.decide(image, "t", 0, None)


# -- completing -------------------------------------------------------------------------------

def test_completes_when_every_target_replica_is_in_sync_and_moves_the_leader_first() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [3, 4, 5]))
    image = _expand_isr(image, [1, 2, 3, 4])
    assert ra.is_reassigning(_part(image))      # 5 still missing
    image = _expand_isr(image, [1, 2, 3, 4, 5])
    part = _part(image)
    assert (part.replicas, part.isr, part.adding, part.removing) == ((3, 4, 5), (3, 4, 5), (), ())
    assert part.leader == 3 and part.leader_epoch == 6
    assert list(ra.ongoing(image)) == []


def test_completion_prefers_the_target_order_for_a_new_leader() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [5, 4, 2]))
    image = _expand_isr(image, [1, 2, 3, 4, 5])
    part = _part(image)
    assert part.replicas == (5, 4, 2) and part.leader == 5


def test_a_leader_that_stays_keeps_leading() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [4, 1, 2]))
    image = _expand_isr(image, [1, 2, 3, 4])
    part = _part(image)
    assert part.replicas == (4, 1, 2) and part.leader == 1
    assert part.leader_epoch == 6            # 3 left the replicas: a new epoch all the same


def test_completions_finishes_moves_the_isr_already_allows() -> None:
    """A move whose ISR already allows completion (a controller that died before acting on
    it): the next active controller finishes it without waiting for an AlterPartition."""
    recs = [{"type": r.PARTITION_CHANGE, "topic_id": TID, "partition": 0,
             "replicas": [4, 1, 2, 3], "isr": [1, 2, 3, 4], "adding": [4], "removing": [3]}]
    image = replay(_image([1, 2, 3]), recs, 5)
    [record] = ra.completions(image)
    part = _part(_apply(image, record))
    assert (part.replicas, part.isr) == ((4, 1, 2), (1, 2, 4))
    assert ra.completions(_image([1, 2, 3])) == []


# -- cancelling -------------------------------------------------------------------------------

def test_cancel_restores_the_original_replicas_and_elects_away_from_adding() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [4, 5, 6]))
    image = _expand_isr(image, [1, 2, 3, 4])
    # leadership somehow on an adding replica (e.g. an election while 1-3 were away)
    image = _apply(image, {"type": r.PARTITION_CHANGE, "topic_id": TID, "partition": 0,
                           "leader": 4, "leader_epoch": 6})
    image = _apply(image, ra.decide(image, "t", 0, None))
    part = _part(image)
    assert set(part.replicas) == {1, 2, 3} and part.isr == (1, 2, 3)
    assert part.leader in (1, 2, 3) and part.leader_epoch == 7
    assert not ra.is_reassigning(part)


def test_cancel_that_needs_an_unclean_election_is_refused_unless_allowed() -> None:
    recs = [{"type": r.PARTITION_CHANGE, "topic_id": TID, "partition": 0,
             "replicas": [4, 1], "isr": [4], "leader": 4, "adding": [4], "removing": [1]}]
    image = replay(_image([1]), recs, 5)
    with pytest.raises(errors.InvalidReplicaAssignment, match="unclean"):
        ra.decide(image, "t", 0, None)
    part = _part(_apply(image, ra.decide(image, "t", 0, None, unclean_allowed=True)))
    assert (part.replicas, part.isr, part.leader) == ((1,), (1,), 1)


def test_adding_and_removing_survive_a_snapshot() -> None:
    image = _image([1, 2, 3])
    image = _apply(image, ra.decide(image, "t", 0, [3, 4, 5]))
    rebuilt = replay(MetadataImage("c"), image_records(image), image.offset)
    assert _part(rebuilt) == _part(image)


# -- properties -------------------------------------------------------------------------------

replica_lists = st.lists(st.sampled_from(list(BROKERS)), min_size=1, max_size=4, unique=True)


@st.composite
def scenarios(draw: Any) -> tuple[list[int], list[int], list[int], list[int]]:
    """(original replicas, original ISR, target, brokers that catch up during the move)"""
    original = draw(replica_lists)
    isr = draw(st.lists(st.sampled_from(original), min_size=1, unique=True))
    target = draw(st.lists(st.sampled_from(list(BROKERS)), min_size=len(original),
                           max_size=len(original), unique=True))
    catching_up = draw(st.lists(st.sampled_from(list(BROKERS)), unique=True))
    return original, isr, target, catching_up


def _invariants(part: PartitionInfo) -> None:
    assert part.leader == -1 or (part.leader in part.replicas and part.leader in part.isr)
    assert set(part.isr) <= set(part.replicas) and part.isr
    assert len(set(part.replicas)) == len(part.replicas)
    assert set(part.adding) <= set(part.replicas) and set(part.removing) <= set(part.replicas)
    assert not set(part.adding) & set(part.removing)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_start_then_complete_keeps_the_replication_factor(s: Any) -> None:
    original, isr, target, catching_up = s
    image = _image(original, isr, leader=isr[0])
    image = _apply(image, ra.decide(image, "t", 0, target))
    part = _part(image)
    _invariants(part)
    assert part.replicas[:len(target)] == tuple(target)
    if not ra.is_reassigning(part):
        assert part.replicas == tuple(target)
        return
    # the leader adds caught-up target replicas to the ISR one by one
    for b in catching_up:
        part = _part(image)
        if not ra.is_reassigning(part) or b not in part.replicas or b in part.isr:
            continue
        if part.leader == -1:
            break
        image = _expand_isr(image, list(part.isr) + [b])
        _invariants(_part(image))
    part = _part(image)
    if ra.is_reassigning(part):
        image = _expand_isr(image, list(dict.fromkeys(list(part.isr) + list(target))))
    part = _part(image)
    _invariants(part)
    assert part.replicas == tuple(target) and len(part.replicas) == len(original)
    assert not ra.is_reassigning(part)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_cancel_restores_the_original_set(s: Any) -> None:
    original, isr, target, catching_up = s
    image = _image(original, isr, leader=isr[0])
    image = _apply(image, ra.decide(image, "t", 0, target))
    if not ra.is_reassigning(_part(image)):
        return   # completed at once: nothing to cancel
    for b in catching_up:
        part = _part(image)
        if b in part.adding and b not in part.isr:
            image = _expand_isr(image, list(part.isr) + [b])
            if not ra.is_reassigning(_part(image)):
                return
    image = _apply(image, ra.decide(image, "t", 0, None))
    part = _part(image)
    _invariants(part)
    assert sorted(part.replicas) == sorted(original) and len(part.replicas) == len(original)
    assert set(part.isr) == set(isr) and not ra.is_reassigning(part)


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.sampled_from(list(BROKERS)))
def test_a_fenced_broker_never_becomes_the_leader(s: Any, fenced: int) -> None:
    original, isr, target, _ = s
    image = _image(original, isr, leader=isr[0], fenced=(fenced,))
    image = _apply(image, ra.decide(image, "t", 0, target))
    image = _expand_isr(image, list(dict.fromkeys(list(_part(image).isr) + target)))
    part = _part(image)
    _invariants(part)
    if part.leader != isr[0]:
        assert part.leader != fenced
