"""The one INFO line a broker writes for the leaderships it takes up in one metadata step."""
from __future__ import annotations

from rillet.replication.manager import leadership_summary


def test_fifty_offsets_partitions_make_one_short_line():
    line = leadership_summary([(("__consumer_offsets", p), 0) for p in range(50)])
    assert line == "50 partitions: __consumer_offsets [0-49] (epoch 0)"


def test_topics_sorted_runs_compacted_epochs_spanned():
    led = [(("t", 5), 2), (("t", 0), 1), (("a", 9), 0), (("t", 1), 1), (("t", 3), 2)]
    assert leadership_summary(led) == "5 partitions: a [9] (epoch 0), t [0-1,3,5] (epochs 1-2)"


def test_one_partition_is_singular():
    assert leadership_summary([(("t", 4), 7)]) == "1 partition: t [4] (epoch 7)"
