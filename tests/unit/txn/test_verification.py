"""KIP-890 verification's pure parts: what a producer is answered for each coordinator code,
and the producer state's guard that a marker voids."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.protocol import errors
from rillet.records import Record, encode_batch, parse_batches
from rillet.storage.producer_state import ProducerStateManager
from rillet.txn.verdicts import check_still_verified, verification_error
from rillet.txn_marker import TxnMarker, encode_marker


@pytest.mark.parametrize("code, abortable_known, expected", [
    (0, True, None),
    (120, True, errors.TransactionAbortable),
    (120, False, errors.InvalidTxnState),
    (48, True, errors.TransactionAbortable),
    (90, True, errors.InvalidProducerEpoch),
    (51, True, errors.NotEnoughReplicas),     # CONCURRENT_TRANSACTIONS: retried
    (16, False, errors.NotEnoughReplicas),    # NOT_COORDINATOR
    (14, False, errors.NotEnoughReplicas),    # COORDINATOR_LOAD_IN_PROGRESS
    (49, True, errors.InvalidProducerIdMapping),
])
def test_verification_answers(code: int, abortable_known: bool, expected: type | None) -> None:
    refusal = verification_error(code, abortable_known)
    assert (refusal is None) if expected is None else type(refusal) is expected


def _commit(state: ProducerStateManager, batch: bytes, offset: int) -> None:
    data = bytearray(batch)
    header = parse_batches(data)[0]
    staged = state.begin()
    marker = TxnMarker(7, 0, True, 0) if header.is_control else None
    staged.check(header, marker)
    staged.record(header, offset, offset + header.last_offset_delta, 1, marker)
    staged.commit()


def test_a_marker_voids_a_verification_in_flight(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    assert state.needs_verification(7, 0)
    guard = state.verification_guard(7)
    check_still_verified(state, 7, 0, guard, "t-0")          # nothing happened meanwhile
    _commit(state, encode_batch([Record(0, 1, None, b"v")], producer_id=7, producer_epoch=0,
                                base_sequence=0, is_transactional=True), 0)
    assert not state.needs_verification(7, 0)                 # ongoing: later batches skip
    stale = state.verification_guard(7)
    _commit(state, encode_marker(TxnMarker(7, 0, True, 0), 1), 1)   # the transaction ends
    assert state.needs_verification(7, 0)
    with pytest.raises(errors.NotEnoughReplicas):
        check_still_verified(state, 7, 0, stale, "t-0")
