"""Scale-down refusals: replication factor, min.insync.replicas, controller voters."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rillet_operator.scale_safety import check_scale_down, removed_brokers


def test_the_highest_ordinals_go():
    assert removed_brokers(5, 3) == [3, 4]
    assert removed_brokers(3, 3) == []


def test_safe_scale_down_and_growth_pass():
    assert check_scale_down(5, 3, {"orders": 3}, {"orders": 2}) is None
    assert check_scale_down(3, 5, {"orders": 3}, {"orders": 2}) is None


def test_replication_factor_above_the_remaining_brokers_is_refused():
    why = check_scale_down(6, 4, {"a": 3, "wide": 5}, {})
    assert why == "topic wide has replication factor 5; 4 brokers cannot hold it"


def test_min_insync_above_the_remaining_brokers_is_refused():
    why = check_scale_down(6, 4, {"a": 3}, {"a": 5})
    assert "min.insync.replicas 5" in why and "topic a" in why


def test_removing_a_controller_voter_is_refused():
    why = check_scale_down(3, 2, {"orders": 3}, {})
    assert why == ("would remove controller voter 2 (voters are 0, 1, 2); topic orders has "
                   "replication factor 3; 2 brokers cannot hold it")
    assert "voters 1, 2" in check_scale_down(3, 1, {}, {})
    assert check_scale_down(2, 0, {}, {}) == "a cluster needs at least one broker, not 0"


@given(st.integers(1, 9), st.integers(1, 9), st.dictionaries(st.text(min_size=1), st.integers(1, 9)))
def test_refused_exactly_when_some_topic_or_voter_does_not_fit(current, new, rf):
    why = check_scale_down(current, new, rf, {})
    fits = new >= current or (new >= min(3, current) and all(v <= new for v in rf.values()))
    assert (why is None) == fits
