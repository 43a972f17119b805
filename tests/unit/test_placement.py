from collections import Counter

import pytest

from rillet.controller.placement import BrokerSlot, PlacementError, assign, rack_alternated


def brokers(n, racks=3):
    return [BrokerSlot(i, f"zone-{'abc'[i % racks]}") for i in range(n)]


def test_rack_alternated_interleaves():
    order = rack_alternated(brokers(6))
    racks = [b.rack for b in order]
    assert racks[:3] == ["zone-a", "zone-b", "zone-c"]
    assert all(racks[i] != racks[i + 1] for i in range(len(racks) - 1))


@pytest.mark.parametrize("n,partitions,rf", [(3, 6, 3), (6, 12, 3), (5, 10, 2), (4, 8, 3)])
def test_every_partition_spans_distinct_racks_and_leaders_balance(n, partitions, rf):
    bs = brokers(n)
    rack_of = {b.node_id: b.rack for b in bs}
    result = assign(bs, partitions, rf, start_index=1)
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(set(replicas)) == rf
        assert len({rack_of[r] for r in replicas}) == min(rf, 3)
    leaders = Counter(r[0] for r in result.values())
    assert max(leaders.values()) - min(leaders.get(b.node_id, 0) for b in bs) <= 1
    if n % 3 == 0:  # even racks: replicas spread evenly too (uneven racks cannot be)
        load = Counter(r for rs in result.values() for r in rs)
        assert max(load.values()) - min(load.get(b.node_id, 0) for b in bs) <= 1


def test_replication_factor_larger_than_brokers_is_refused():
    with pytest.raises(PlacementError, match="larger than the 2 available"):
        assign(brokers(2), 1, 3)


def test_added_partitions_continue_numbering():
    result = assign(brokers(3), 2, 1, first_partition=4)
    assert sorted(result) == [4, 5]


# -- properties (hypothesis) -------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def placements(draw):
    """Brokers over some racks, a partition count, a replication factor and a start."""
    n = draw(st.integers(1, 9))
    rack_count = draw(st.integers(1, 4))
    racks = draw(st.lists(st.integers(0, rack_count - 1), min_size=n, max_size=n))
    ids = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    bs = [BrokerSlot(i, f"rack-{r}") for i, r in zip(ids, racks)]
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    first = draw(st.integers(0, 5))
    start = draw(st.integers(0, n - 1))
    return bs, partitions, rf, first, start


@settings(max_examples=300, deadline=None)
@given(placements())
def test_placement_properties(case):
    bs, partitions, rf, first, start = case
    result = assign(bs, partitions, rf, first_partition=first, start_index=start)
    rack_of = {b.node_id: b.rack for b in bs}
    racks = set(rack_of.values())
    assert sorted(result) == list(range(first, first + partitions))
    for replicas in result.values():
        assert len(replicas) == rf                      # replication factor kept
        assert len(set(replicas)) == rf                 # no broker twice
        assert set(replicas) <= set(rack_of)            # only the brokers given
        assert len({rack_of[r] for r in replicas}) == min(rf, len(racks))   # racks spread
    leaders = Counter(r[0] for r in result.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in rack_of) <= 1
    load = Counter(r for rs in result.values() for r in rs)
    # Rack spread decides how many replicas each rack gets; inside a rack they balance.
    for rack in racks:
        loads = [load.get(b, 0) for b, r in rack_of.items() if r == rack]
        assert max(loads) - min(loads) <= 2
    sizes = Counter(rack_of.values())
    if len(set(sizes.values())) == 1:   # racks of one size: balanced over all brokers
        assert max(load.values()) - min(load.get(b, 0) for b in rack_of) <= 2
