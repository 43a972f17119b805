"""One transactional id's state and the transitions the coordinator may make: pure.

Kafka's TransactionMetadata and TransactionState (KIP-98). Every function here takes the
current state and a request and returns the next state to persist (or raises the error
the client gets); nothing changes until the coordinator has that next state on the
__transaction_state log, and only then is it applied. States:

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit/PrepareAbort
      ^                                             | markers written to every partition
      +---- CompleteCommit/CompleteAbort <----------+
    Ongoing --InitProducerId or timeout (epoch bumped: the old producer is fenced)--> PrepareAbort

A producer whose epoch or id is not the current one gets PRODUCER_FENCED or
INVALID_PRODUCER_ID_MAPPING; a request meeting a transaction between Prepare and Complete
gets CONCURRENT_TRANSACTIONS, which clients retry.

Thread safety: immutable values and pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from ..protocol import errors

# An epoch this high is not bumped further: a new producer id starts at epoch 0 (Kafka).
MAX_EPOCH = 32767
NO_PRODUCER_ID = -1

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as __transaction_state stores them."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions answer."""
        return "".join(w.capitalize() for w in self.name.split("_"))

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                        TxnState.PREPARE_EPOCH_FENCE)


STATE_BY_NAME = {s.kafka_name: s for s in TxnState}


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id's state as __transaction_state stores it."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int          # when the transaction (Ongoing) began; -1 when none did
    last_update_ms: int
    # The epoch before a producer's own InitProducerId (KIP-360: naming its id and epoch)
    # bumped it, so that call's retry is answered again instead of fenced; -1 after a new
    # instance's call, whose older epochs are all zombies. In memory only (no field in the
    # v0 record), as Kafka's lastProducerEpoch before record v1.
    last_epoch: int = field(default=-1, compare=False)

    def to(self, state: TxnState, now: int, **changes: object) -> "TxnMetadata":
        return replace(self, state=state, last_update_ms=now, **changes)  # type: ignore[arg-type]

    @property
    def commit(self) -> bool:
        """Which marker a Prepare state writes."""
        return self.state == TxnState.PREPARE_COMMIT

    def expired(self, now: int) -> bool:
        return self.state == TxnState.ONGOING and now > self.start_ms + self.timeout_ms


def fresh(transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TxnMetadata:
    """A new id's first state: a new producer id at epoch 0."""
    return TxnMetadata(transactional_id, producer_id, 0, timeout_ms, TxnState.EMPTY,
                       frozenset(), -1, now)


def can_bump(m: TxnMetadata) -> bool:
    return m.producer_epoch < MAX_EPOCH - 1


def check_producer(m: TxnMetadata, producer_id: int, epoch: int) -> None:
    if m.producer_id != producer_id:
        raise errors.InvalidProducerIdMapping(
            f"transactional id {m.transactional_id!r} has producer id {m.producer_id}, "
            f"not {producer_id}")
    if m.producer_epoch != epoch:
        raise errors.ProducerFenced(
            f"producer {producer_id} epoch {epoch} of {m.transactional_id!r} is fenced by "
            f"epoch {m.producer_epoch}")


def init_producer(m: TxnMetadata, timeout_ms: int, expected_pid: int, expected_epoch: int,
                  now: int, new_pid: int | None) -> TxnMetadata:
    """InitProducerId on a known id. Empty or Complete: the epoch is bumped (a new
    producer id when it is exhausted: ``new_pid``), fencing every older producer. Ongoing:
    the epoch is bumped and the transaction aborted first (PrepareAbort; the client retries
    after CONCURRENT_TRANSACTIONS). KIP-360: a producer naming its id and epoch must be
    the current one."""
    if (expected_pid, expected_epoch) == (m.producer_id, m.last_epoch) \
            and m.state == TxnState.EMPTY:
        return m   # a retry of the call that bumped the epoch: the same answer
    if expected_pid != NO_PRODUCER_ID and (expected_pid != m.producer_id
                                           or expected_epoch != m.producer_epoch):
        raise errors.ProducerFenced(
            f"producer {expected_pid} epoch {expected_epoch} of {m.transactional_id!r} is "
            f"not the current {m.producer_id} epoch {m.producer_epoch}")
    if m.state.preparing:
        raise errors.ConcurrentTransactions(
            f"{m.transactional_id!r} is completing a transaction ({m.state.kafka_name})")
    if m.state == TxnState.ONGOING:
        return abort_fencing(m, now)
    if can_bump(m):
        return m.to(TxnState.EMPTY, now, producer_epoch=m.producer_epoch + 1,
                    timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                    last_epoch=m.producer_epoch if expected_pid != NO_PRODUCER_ID else -1)
    assert new_pid is not None, "an exhausted epoch needs a new producer id"
    return m.to(TxnState.EMPTY, now, producer_id=new_pid, producer_epoch=0,
                timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)


def abort_fencing(m: TxnMetadata, now: int) -> TxnMetadata:
    """Abort an Ongoing transaction with the epoch bumped, so its producer is fenced on
    every partition by the markers (re-initialised id, or timed out)."""
    epoch = m.producer_epoch + 1 if can_bump(m) else m.producer_epoch
    return m.to(TxnState.PREPARE_ABORT, now, producer_epoch=epoch)


def add_partitions(m: TxnMetadata, producer_id: int, epoch: int,
                   partitions: frozenset[TopicPartition], now: int) -> TxnMetadata | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: the next state, None when nothing changes."""
    check_producer(m, producer_id, epoch)
    if m.state.preparing:
        raise errors.ConcurrentTransactions(
            f"{m.transactional_id!r} is completing a transaction ({m.state.kafka_name})")
    if m.state == TxnState.ONGOING:
        if partitions <= m.partitions:
            return None
        return m.to(TxnState.ONGOING, now, partitions=m.partitions | partitions)
    if m.state == TxnState.DEAD:
        raise errors.InvalidTxnState(f"{m.transactional_id!r} has expired")
    return m.to(TxnState.ONGOING, now, partitions=partitions, start_ms=now)


def end_txn(m: TxnMetadata, producer_id: int, epoch: int, commit: bool,
            now: int) -> TxnMetadata | None:
    """EndTxn: Ongoing goes to PrepareCommit/PrepareAbort; a retry of a completed end is
    answered again (None: nothing to write)."""
    check_producer(m, producer_id, epoch)
    wanted = "commit" if commit else "abort"
    if m.state == TxnState.ONGOING:
        return m.to(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now)
    if m.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return None
    if m.state in ((TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT),
                   TxnState.PREPARE_EPOCH_FENCE):
        raise errors.ConcurrentTransactions(
            f"{m.transactional_id!r} is completing its {wanted}")
    raise errors.InvalidTxnState(
        f"{m.transactional_id!r} cannot {wanted} in state {m.state.kafka_name}")


def complete(m: TxnMetadata, now: int) -> TxnMetadata:
    """Every marker is written: the transaction is over."""
    assert m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT), m.state
    done = TxnState.COMPLETE_COMMIT if m.commit else TxnState.COMPLETE_ABORT
    return m.to(done, now, partitions=frozenset())


def expirable(m: TxnMetadata, now: int, expiration_ms: int) -> bool:
    """transactional.id.expiration.ms: an id idle that long, with no transaction open."""
    return (m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            and now - m.last_update_ms > expiration_ms)
