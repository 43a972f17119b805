"""The pure parts of AdminClient's broker calls: sizes across replicas, short ISRs, and
reading DescribeLogDirs results."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rillet.client.admin_cluster import log_dir_sizes, max_partition_sizes, short_isr
from rillet.client.connection import raise_for
from rillet.protocol import errors

tps = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3))
sizes = st.dictionaries(st.integers(1, 5), st.dictionaries(tps, st.integers(0, 10**9)))


@given(sizes)
def test_max_partition_sizes_is_the_largest_replica(by_broker: dict) -> None:
    out = max_partition_sizes(by_broker)
    assert set(out) == {tp for s in by_broker.values() for tp in s}
    for tp, size in out.items():
        assert size == max(s[tp] for s in by_broker.values() if tp in s)


def test_short_isr_lists_partitions_missing_an_in_sync_replica() -> None:
    replicas = {("a", 0): (1, 2, 3), ("a", 1): (1, 2), ("b", 0): (3,)}
    isr = {("a", 0): (1, 2), ("a", 1): (2, 1)}
    assert short_isr(replicas, isr) == [("a", 0), ("b", 0)]
    assert short_isr(replicas, {**isr, ("a", 0): (3, 2, 1), ("b", 0): (3,)}) == []


def _part(p: int, size: int, future: bool = False) -> NS:
    return NS(partition_index=p, partition_size=size, is_future_key=future)


def test_log_dir_sizes_skips_failed_dirs_and_future_replicas() -> None:
    results = [
        NS(error_code=0, topics=[NS(name="a", partitions=[_part(0, 10), _part(1, 0)])]),
        NS(error_code=0, topics=[NS(name="b", partitions=[_part(0, 7, future=True)])]),
        NS(error_code=57, topics=[NS(name="c", partitions=[_part(0, 5)])]),
    ]
    assert log_dir_sizes(results) == {("a", 0): 10, ("a", 1): 0}


def test_raise_for_keeps_the_brokers_message() -> None:
    with pytest.raises(errors.InvalidRequest, match="unregister broker 3: .*still holds"):
        raise_for(42, "unregister broker 3", "broker 3 still holds replicas of t-0")
    with pytest.raises(errors.BrokerNotAvailable):
        raise_for(8, "x")
    raise_for(0, "fine", "ignored")
