"""What a leader does with the transaction coordinator's verification answer (KIP-890 part
1; the question is txn/verification.py's): the error the Produce or TxnOffsetCommit gets,
and the check right before the append that the answer still holds.

Apart from the verifier so that the request path imports only this, not the transaction
coordinator a broker loads on first use (on_demand.py).

Thread safety: pure functions.
"""
from __future__ import annotations

from ..protocol import errors
from ..storage.producer_state import ProducerStateManager

# Coordinator answers that mean "not now": the produce is retried.
_RETRY_LATER = {errors.CoordinatorLoadInProgress.code, errors.CoordinatorNotAvailable.code,
                errors.NotCoordinator.code, errors.ConcurrentTransactions.code,
                errors.BrokerNotAvailable.code, errors.LeaderNotAvailable.code,
                errors.RequestTimedOut.code}


def verification_error(code: int, abortable_known: bool) -> errors.KafkaError | None:
    """What a Produce (or TxnOffsetCommit) answers for a verification code (None: go on);
    ``abortable_known``: its version knows TRANSACTION_ABORTABLE (Produce v11+,
    TxnOffsetCommit v4+)."""
    if code == 0:
        return None
    if code in (errors.TransactionAbortable.code, errors.InvalidTxnState.code):
        reason = "the partition was not added to the producer's transaction"
        if abortable_known:
            return errors.TransactionAbortable(reason)
        return errors.InvalidTxnState(reason)
    if code == errors.ProducerFenced.code:
        return errors.InvalidProducerEpoch("the transaction coordinator fenced this producer")
    if code in _RETRY_LATER or code == errors.NotEnoughReplicas.code:
        return errors.NotEnoughReplicas(
            f"the transaction coordinator could not verify the partition now (error {code})")
    return errors.error_for_code(code)(f"transaction verification failed (error {code})")


def check_still_verified(state: ProducerStateManager, producer_id: int, epoch: int,
                         guard: object, where: str) -> None:
    """Called with no await before the append: a marker written while the coordinator was
    asked dropped the guard, and the batch must not open a transaction the answer was not
    about (NOT_ENOUGH_REPLICAS: the client retries and is asked again)."""
    if state.needs_verification(producer_id, epoch) and not state.guard_holds(producer_id, guard):
        raise errors.NotEnoughReplicas(
            f"producer {producer_id}'s transaction on {where} ended while it was verified")
