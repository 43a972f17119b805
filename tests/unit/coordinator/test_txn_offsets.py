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


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def test_producer_epochs_are_forgotten_once_expired_unless_offsets_are_pending() -> None:
    clock = Clock()
    pending = PendingTxnOffsets(clock, expiration_ms=1000)
    pending.add(1, 100, 3, ("g", "t", 0), offset(5))     # pending until its marker
    pending.end(2, 200, 4, commit=True)                   # nothing pending
    clock.ms = 1500
    pending.end(2, 300, 0, commit=True)                   # a new producer; the others expired
    assert set(pending.epochs) == {100, 300}
    with pytest.raises(errors.ProducerFenced):
        pending.check(100, 2)                             # still fenced while pending
    pending.end(1, 100, 3, commit=True)
    clock.ms = 3000
    pending.end(2, 300, 0, commit=True)
    assert set(pending.epochs) == {300}


def test_producer_epochs_are_bounded_in_number() -> None:
    clock = Clock()
    pending = PendingTxnOffsets(clock, max_producers=3)
    pending.add(1, 7, 1, ("g", "t", 0), offset(1))        # pending: never forgotten
    for pid in range(100, 110):
        clock.ms += 1
        pending.end(1, pid, 0, commit=True)
    # the pending producer stays; the least recently seen others make room
    assert set(pending.epochs) == {7, 108, 109}
