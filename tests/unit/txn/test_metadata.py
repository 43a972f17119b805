"""The transaction state machine (txn/metadata.py) and its records (txn/records.py)."""
from __future__ import annotations

import pytest

from rillet.protocol import errors
from rillet.txn import metadata as txn
from rillet.txn.metadata import MAX_EPOCH, TxnState
from rillet.txn.records import decode_txn_key, decode_txn_value, txn_key, txn_value

TP = ("t", 0)


def ongoing(now: int = 100) -> txn.TxnMetadata:
    m = txn.fresh("id", 7, 1000, 0)
    new = txn.add_partitions(m, 7, 0, frozenset({TP}), now)
    assert new is not None
    return new


def test_add_partitions_opens_a_transaction_and_adds_only_what_is_new() -> None:
    m = ongoing(now=100)
    assert (m.state, m.partitions, m.start_ms) == (TxnState.ONGOING, {TP}, 100)
    assert txn.add_partitions(m, 7, 0, frozenset({TP}), 200) is None
    more = txn.add_partitions(m, 7, 0, frozenset({("t", 1)}), 200)
    assert more is not None and more.partitions == {TP, ("t", 1)} and more.start_ms == 100


def test_a_stale_producer_is_fenced_and_a_wrong_id_refused() -> None:
    m = ongoing()
    with pytest.raises(errors.ProducerFenced):
        txn.add_partitions(m, 7, 1, frozenset({TP}), 0)
    with pytest.raises(errors.InvalidProducerIdMapping):
        txn.end_txn(m, 8, 0, True, 0)


def test_end_prepares_then_completes_and_a_retry_is_answered_again() -> None:
    prepared = txn.end_txn(ongoing(), 7, 0, True, 300)
    assert prepared is not None and prepared.state == TxnState.PREPARE_COMMIT and prepared.commit
    with pytest.raises(errors.ConcurrentTransactions):
        txn.end_txn(prepared, 7, 0, True, 301)
    with pytest.raises(errors.InvalidTxnState):
        txn.end_txn(prepared, 7, 0, False, 301)
    with pytest.raises(errors.ConcurrentTransactions):
        txn.add_partitions(prepared, 7, 0, frozenset({TP}), 301)
    done = txn.complete(prepared, 400)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    assert txn.end_txn(done, 7, 0, True, 401) is None
    with pytest.raises(errors.InvalidTxnState):
        txn.end_txn(done, 7, 0, False, 401)
    with pytest.raises(errors.InvalidTxnState):
        txn.end_txn(txn.fresh("id", 7, 1000, 0), 7, 0, True, 0)


def test_init_bumps_the_epoch_and_aborts_an_open_transaction_first() -> None:
    m = ongoing()
    aborting = txn.init_producer(m, 5000, -1, -1, 500, None)
    assert (aborting.state, aborting.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    with pytest.raises(errors.ConcurrentTransactions):
        txn.init_producer(aborting, 5000, -1, -1, 501, None)
    bumped = txn.init_producer(txn.complete(aborting, 600), 5000, -1, -1, 700, None)
    assert (bumped.state, bumped.producer_id, bumped.producer_epoch, bumped.timeout_ms) == (
        TxnState.EMPTY, 7, 2, 5000)
    with pytest.raises(errors.ProducerFenced):
        txn.init_producer(bumped, 5000, 7, 1, 800, None)
    exhausted = txn.TxnMetadata("id", 7, MAX_EPOCH - 1, 1000, TxnState.EMPTY, frozenset(),
                                -1, 0)
    renewed = txn.init_producer(exhausted, 1000, -1, -1, 900, new_pid=9)
    assert (renewed.producer_id, renewed.producer_epoch) == (9, 0)


def test_timeouts_and_expiry() -> None:
    m = ongoing(now=100)
    assert not m.expired(1100) and m.expired(1101)
    fenced = txn.abort_fencing(m, 1200)
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    assert not txn.expirable(m, 10**9, 1000)
    assert txn.expirable(txn.complete(fenced, 1300), 2301, 1000)


def test_records_round_trip_in_kafkas_layout() -> None:
    m = txn.add_partitions(ongoing(), 7, 0, frozenset({("u", 3), ("t", 2)}), 150)
    assert m is not None
    key = txn_key("id")
    assert key == b"\x00\x00\x00\x02id"
    assert decode_txn_key(key) == "id"
    value = txn_value(m)
    assert value[:2] == b"\x00\x00"   # version 0
    assert decode_txn_value("id", value) == m
    assert TxnState.PREPARE_COMMIT.kafka_name == "PrepareCommit"


def test_a_retried_bump_is_answered_again_not_fenced() -> None:
    """KIP-360: the producer names its id and epoch; its retry names the same pair after
    the first call already bumped it."""
    m = txn.complete(txn.end_txn(ongoing(), 7, 0, False, 200), 300)   # type: ignore[arg-type]
    bumped = txn.init_producer(m, 1000, 7, 0, 400, None)
    assert bumped.producer_epoch == 1 and bumped.last_epoch == 0
    assert txn.init_producer(bumped, 1000, 7, 0, 401, None) is bumped
    with pytest.raises(errors.ProducerFenced):
        txn.init_producer(bumped, 1000, 7, 5, 401, None)
