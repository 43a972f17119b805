"""Transactional offset commits waiting for their marker (coordinator/txn_offsets.py)."""
from __future__ import annotations

import pytest

from rillet.coordinator.group_types import OffsetAndMetadata
from rillet.coordinator.txn_offsets import PendingTxnOffsets
from rillet.protocol import errors


def offset(n: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(n, -1, "", 0, None)


def test_commit_applies_abort_drops_and_only_that_producer() -> None:
    pending = PendingTxnOffsets()
    pending.add(3, 100, 0, ("g", "t", 0), offset(5))
    pending.add(3, 200, 0, ("g", "t", 1), offset(7))
    assert pending.pending_for("g") == {("t", 0), ("t", 1)}
    assert pending.end(3, 100, 0, commit=True) == {("g", "t", 0): offset(5)}
    assert pending.end(3, 200, 0, commit=False) == {}
    assert pending.pending_for("g") == set()
    assert pending.end(3, 100, 0, commit=True) == {}   # a repeated marker settles nothing


def test_an_older_epoch_is_fenced_after_a_marker_bumped_it() -> None:
    pending = PendingTxnOffsets()
    pending.add(1, 100, 2, ("g", "t", 0), offset(5))
    pending.check(100, 2)
    pending.end(1, 100, 3, commit=False)
    with pytest.raises(errors.ProducerFenced):
        pending.check(100, 2)
    pending.check(100, 3)


def test_forgetting_a_partition_drops_its_pending_offsets() -> None:
    pending = PendingTxnOffsets()
    pending.add(1, 100, 0, ("g", "t", 0), offset(5))
    pending.forget(1)
    assert pending.pending_for("g") == set()
