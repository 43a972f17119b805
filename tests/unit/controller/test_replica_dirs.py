"""controller/replica_dirs.py: a live broker's replicas on a failed log dir lose their
leadership and ISR slots, partition by partition, and stay ineligible (leader, ISR) until
the broker assigns them to a real dir again; on hand-built images."""
from __future__ import annotations

from typing import Any

import pytest

import uuid

from rillet.controller import election, leader_balance, reassignment, replica_dirs
from rillet.controller import isr as isr_changes
from rillet.metadata.directories import LOST, UNASSIGNED
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
    answers, records = replica_dirs.decide(image, 1, {("a", 0): LOST, ("a", 2): LOST},
                                             lambda t: False)
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
    _, records = replica_dirs.decide(image, 1, {("a", 3): LOST}, lambda t: False)
    part = replay(image, records, 1).partition("a", 3)
    # Its ISR stays: only broker 1 holds every acknowledged record (no unclean election).
    assert part is not None and (part.leader, part.isr) == (-1, (1,))
    _, records = replica_dirs.decide(image, 1, {("a", 3): LOST}, lambda t: True)
    part = replay(image, records, 1).partition("a", 3)
    assert part is not None and part.leader in (2, 3) and part.isr == (part.leader,)


def test_unknown_partitions_and_foreign_replicas_are_answered_each() -> None:
    answers, records = replica_dirs.decide(_image(), 1, {("a", 4): LOST, ("a", 9): LOST,
                                                       ("b", 0): LOST}, lambda t: False)
    assert records == []
    assert isinstance(answers[("a", 4)], errors.NotLeaderOrFollower)
    assert isinstance(answers[("a", 9)], errors.UnknownTopicOrPartition)
    assert isinstance(answers[("b", 0)], errors.UnknownTopicOrPartition)


DIR_A = uuid.UUID("8a4c6f9e-0d5b-4a43-9b1e-2f7c3d6e5a10")


def test_a_new_replicas_dir_is_recorded_and_survives_a_replica_set_change() -> None:
    image = _image()
    answers, records = replica_dirs.decide(image, 2, {("a", 0): DIR_A}, lambda t: False)
    assert answers == {("a", 0): None}
    after = replay(image, records, 1)
    part = after.partition("a", 0)
    assert part is not None and part.directory_of(2) == DIR_A
    assert part.directory_of(1) == UNASSIGNED and (part.leader, part.isr) == (1, (1, 2))
    # The same assignment again changes nothing.
    assert replica_dirs.decide(after, 2, {("a", 0): DIR_A}, lambda t: False)[1] == []
    # A reassignment keeps the dir of a replica that stays, a new one starts unassigned.
    moved = replay(after, [election.partition_change(part, replicas=(4, 2))], 2)
    part = moved.partition("a", 0)
    assert part is not None and part.directories == (UNASSIGNED, DIR_A)


def test_a_replica_on_a_lost_dir_is_never_elected_nor_let_back_in_sync() -> None:
    image = _image()
    _, records = replica_dirs.decide(image, 1, {("a", 3): LOST}, lambda t: False)
    image = replay(image, records, 1)
    part = image.partition("a", 3)
    assert part is not None and (part.leader, part.isr) == (-1, (1,)) and part.on_lost_dir(1)
    # A preferred election (broker 1 is the first replica, in the ISR, alive) refuses it.
    outcomes, recs = leader_balance.decide_elections(image, leader_balance.PREFERRED,
                                                     [("a", 3)])
    assert recs == [] and isinstance(outcomes[0].error, errors.PreferredLeaderNotAvailable)
    # Broker 1 returning (unfenced again) is not given the leadership back either.
    assert election.on_broker_returning(image, 1) == []
    # An unclean election takes a live replica on a working dir, never broker 1.
    outcomes, recs = leader_balance.decide_elections(image, leader_balance.UNCLEAN,
                                                     [("a", 3)])
    chosen = replay(image, recs, 2).partition("a", 3)
    assert chosen is not None and chosen.leader in (2, 3) and chosen.isr == (chosen.leader,)
    # A leader may not take it back into the ISR.
    led = replay(image, [election.partition_change(part, leader=2, isr=(2,),
                                                   leader_epoch=6)], 2)
    lp = led.partition("a", 3)
    assert lp is not None
    with pytest.raises(errors.IneligibleReplica):
        isr_changes.check(led, 2, isr_changes.IsrChange("a", 3, 6, lp.partition_epoch, (2, 1)))


def test_the_last_in_sync_replica_back_on_a_repaired_dir_may_lead_again() -> None:
    image = _image()
    _, records = replica_dirs.decide(image, 1, {("a", 3): LOST}, lambda t: False)
    image = replay(image, records, 1)
    _, records = replica_dirs.decide(image, 1, {("a", 3): DIR_A}, lambda t: False)
    image = replay(image, records, 2)
    part = image.partition("a", 3)
    assert part is not None and (part.leader, part.isr) == (-1, (1,))
    assert part.directory_of(1) == DIR_A and not part.on_lost_dir(1)
    # Unfenced again (a restarted broker assigns its dirs before it heartbeats): it leads.
    back = replay(image, election.on_broker_returning(image, 1), 3).partition("a", 3)
    assert back is not None and (back.leader, back.leader_epoch) == (1, 7)


def test_a_replica_cannot_be_unassigned() -> None:
    answers, records = replica_dirs.decide(_image(), 1, {("a", 0): UNASSIGNED},
                                           lambda t: False)
    assert records == [] and isinstance(answers[("a", 0)], errors.InvalidRequest)


def test_a_reassignment_does_not_hand_leadership_to_a_replica_on_a_lost_dir() -> None:
    image = _image()
    _, records = replica_dirs.decide(image, 1, {("a", 3): LOST}, lambda t: False)
    image = replay(image, records, 1)
    # Moving a-3 onto (1, 4): broker 1 is its only in-sync replica, but on a lost dir.
    rec = reassignment.decide(image, "a", 3, [1, 4])
    assert rec is not None and rec.get("leader", -1) == -1


def test_offline_replicas_are_those_assigned_to_the_offline_dirs() -> None:
    """A heartbeat's offline dirs (KIP-858) name the broker's replicas to make LOST: those
    in one of them, not the ones in another dir, LOST already or unassigned."""
    bad, good = uuid.UUID(int=100), uuid.UUID(int=101)
    image = _image()
    _, records = replica_dirs.decide(image, 1, {("a", 0): bad, ("a", 1): good,
                                                ("a", 2): bad, ("a", 3): LOST},
                                     lambda t: False)
    image = replay(image, records, 1)
    assert replica_dirs.offline_replicas(image, 1, {bad}) == {("a", 0): LOST, ("a", 2): LOST}
    assert replica_dirs.offline_replicas(image, 2, {bad}) == {}    # another broker's
    assert replica_dirs.offline_replicas(image, 1, {LOST, UNASSIGNED}) == {}
    assert replica_dirs.offline_replicas(image, 1, set()) == {}
