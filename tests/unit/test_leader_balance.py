"""Preferred and unclean elections and the periodic rebalance, on hand-built images."""
from __future__ import annotations

import uuid

import pytest

from rillet.controller import leader_balance as lb
from rillet.controller.brokers import decide_unregister
from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import image_records
from rillet.protocol import errors


def _image(partitions: dict[int, tuple[list[int], list[int], int]],
           fenced: tuple[int, ...] = (), brokers: tuple[int, ...] = (1, 2, 3)
           ) -> MetadataImage:
    """Topic "t": partition -> (replicas, isr, leader); brokers 1-3, some fenced."""
    tid = str(uuid.uuid4())
    recs: list[dict] = [{"type": r.REGISTER_BROKER, "node_id": b, "host": "127.0.0.1",
                         "port": 9000 + b, "fenced": b in fenced} for b in brokers]
    recs.append({"type": r.TOPIC, "name": "t", "topic_id": tid})
    recs += [{"type": r.PARTITION, "topic_id": tid, "partition": p, "replicas": reps,
              "isr": isr, "leader": leader, "leader_epoch": 3}
             for p, (reps, isr, leader) in partitions.items()]
    return replay(MetadataImage(cluster_id="c"), recs, 0)


def _apply(image: MetadataImage, records: list[dict]) -> MetadataImage:
    return replay(image, records, image.offset + 1)


def _errors(outcomes: list[lb.ElectionOutcome]) -> dict[int, type | None]:
    return {o.partition: None if o.error is None else type(o.error) for o in outcomes}


def test_preferred_election_moves_leadership_to_the_first_replica() -> None:
    image = _image({0: ([1, 2, 3], [1, 2, 3], 2)})
    outcomes, records = lb.decide_elections(image, lb.PREFERRED, [("t", 0)])
    assert _errors(outcomes) == {0: None}
    part = _apply(image, records).partition("t", 0)
    assert (part.leader, part.leader_epoch, part.isr) == (1, 4, (1, 2, 3))


@pytest.mark.parametrize("isr,leader,fenced,error", [
    ([1, 2, 3], 1, (), errors.ElectionNotNeeded),
    ([2, 3], 2, (), errors.PreferredLeaderNotAvailable),        # preferred out of the ISR
    ([1, 2, 3], 2, (1,), errors.PreferredLeaderNotAvailable),   # preferred fenced
])
def test_preferred_election_refusals(isr, leader, fenced, error) -> None:
    image = _image({0: ([1, 2, 3], isr, leader)}, fenced=fenced)
    outcomes, records = lb.decide_elections(image, lb.PREFERRED, [("t", 0)])
    assert _errors(outcomes) == {0: error} and records == []
    assert outcomes[0].error.message   # a human reason


def test_all_partitions_leave_out_those_already_led_by_their_preferred_replica() -> None:
    image = _image({0: ([1, 2], [1, 2], 1), 1: ([2, 1], [1, 2], 1), 2: ([3, 1], [1], 1)})
    outcomes, records = lb.decide_elections(image, lb.PREFERRED, None)
    assert _errors(outcomes) == {1: None, 2: errors.PreferredLeaderNotAvailable}
    assert len(records) == 1


def test_unknown_partition() -> None:
    outcomes, _ = lb.decide_elections(_image({0: ([1], [1], 1)}), lb.PREFERRED, [("t", 9)])
    assert _errors(outcomes) == {9: errors.UnknownTopicOrPartition}


def test_unclean_election_takes_a_live_replica_outside_the_isr_as_the_whole_isr() -> None:
    image = _image({0: ([1, 2], [1], -1)}, fenced=(1,))
    outcomes, records = lb.decide_elections(image, lb.UNCLEAN, [("t", 0)])
    assert _errors(outcomes) == {0: None}
    part = _apply(image, records).partition("t", 0)
    assert (part.leader, part.isr, part.leader_epoch) == (2, (2,), 4)


def test_unclean_election_prefers_a_live_isr_member_and_needs_a_dead_leader() -> None:
    image = _image({0: ([1, 2, 3], [2, 3], -1), 1: ([1, 2, 3], [1, 2], 1),
                    2: ([1, 2], [1], -1)}, fenced=(1, 2))
    outcomes, records = lb.decide_elections(image, lb.UNCLEAN, [("t", 0), ("t", 1), ("t", 2)])
    assert _errors(outcomes) == {0: None, 1: None, 2: errors.EligibleLeadersNotAvailable}
    new = _apply(image, records)
    # 3 is in partition 0's ISR: a clean election, the ISR stays.
    assert (new.partition("t", 0).leader, new.partition("t", 0).isr) == (3, (2, 3))
    # Partition 1's recorded leader is fenced and no ISR member is live: 3 takes it alone.
    assert (new.partition("t", 1).leader, new.partition("t", 1).isr) == (3, (3,))
    live = _image({0: ([1, 2], [1, 2], 1)})
    outcomes, _ = lb.decide_elections(live, lb.UNCLEAN, [("t", 0)])
    assert _errors(outcomes) == {0: errors.ElectionNotNeeded}


def test_rebalance_acts_only_beyond_the_imbalance_percentage() -> None:
    # Broker 1 prefers 10 partitions and leads 9 of them: 10% off, not above 10%.
    parts = {p: ([1, 2], [1, 2], 1) for p in range(9)}
    parts[9] = ([1, 2], [1, 2], 2)
    image = _image(parts)
    assert lb.imbalance(image)[1] == (1, 10)
    assert lb.rebalance(image, 10) == ([], [])
    moved, records = lb.rebalance(image, 5)
    assert moved == [("t", 9)]
    assert _apply(image, records).partition("t", 9).leader == 1


def test_rebalance_skips_a_preferred_replica_not_back_in_the_isr() -> None:
    image = _image({0: ([1, 2], [2], 2), 1: ([1, 2], [1, 2], 2)})
    moved, _ = lb.rebalance(image, 10)
    assert moved == [("t", 1)]


# -- unregistering ---------------------------------------------------------------------------

def test_unregister_refuses_a_broker_holding_replicas_and_names_them() -> None:
    image = _image({0: ([1, 2], [1, 2], 1), 1: ([2, 3], [2, 3], 2)})
    with pytest.raises(errors.InvalidRequest, match=r"broker 3 .* 1 partition\(s\): t-1"):
        decide_unregister(image, 3)
    with pytest.raises(errors.BrokerIdNotRegistered):
        decide_unregister(image, 7)


def test_an_unregistered_broker_leaves_the_image_and_its_snapshot() -> None:
    image = _image({0: ([1, 2], [1, 2], 1)}, fenced=(3,))
    new = _apply(image, decide_unregister(image, 3))
    assert sorted(new.brokers) == [1, 2]
    rebuilt = replay(MetadataImage(cluster_id="c"), image_records(new), new.offset)
    assert sorted(rebuilt.brokers) == [1, 2]
