"""A Topic's replication factor change (spec.replicas): which replicas move, pure."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rillet_operator.topics import resize_replicas

RACKS = ("a", "b", "c")


@st.composite
def topics_and_brokers(draw):
    n = draw(st.integers(2, 7))
    brokers = {b: draw(st.sampled_from(RACKS)) for b in range(1, n + 1)}
    rf = draw(st.integers(1, n))
    parts = {p: tuple(draw(st.permutations(sorted(brokers))))[:rf]
             for p in range(draw(st.integers(1, 8)))}
    return parts, brokers, draw(st.integers(1, n))


@settings(max_examples=300, deadline=None)
@given(topics_and_brokers())
def test_every_partition_reaches_the_factor_moving_only_the_difference(case):
    parts, brokers, rf = case
    changed = resize_replicas(parts, brokers, rf)
    for p, old in parts.items():
        new = changed.get(p, old)
        assert len(new) == rf and len(set(new)) == rf and set(new) <= set(brokers)
        if rf >= len(old):
            assert new[:len(old)] == old          # growing keeps every replica, in order
        else:
            assert set(new) < set(old) and new[0] == old[0]   # shrinking keeps the leader
        assert (p in changed) == (len(old) != rf)
        if rf >= len(old):
            # each added replica brings a rack the partition lacks while one is left
            racks_before = len({brokers[b] for b in old})
            assert len({brokers[b] for b in new}) == min(
                len(set(brokers.values())), racks_before + rf - len(old))


def test_growing_spreads_racks_then_load():
    brokers = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    parts = {p: (1 + p % 6,) for p in range(6)}
    changed = resize_replicas(parts, brokers, 3)
    for p, new in changed.items():
        assert {brokers[b] for b in new} == {"a", "b", "c"}, (p, new)
    load = Counter(b for r in changed.values() for b in r)
    assert max(load.values()) - min(load.values()) <= 1, load


def test_shrinking_drops_a_replica_whose_rack_is_doubled():
    brokers = {1: "a", 2: "b", 3: "a"}
    assert resize_replicas({0: (1, 2, 3)}, brokers, 2) == {0: (1, 2)}
    assert resize_replicas({0: (3, 1, 2)}, brokers, 2) == {0: (3, 2)}
