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
