"""KIP-890 part 1, server-side verification: before a producer's first transactional batch
on a partition is appended, the partition's leader asks the transaction coordinator whether
that partition was added to the producer's transaction.

Without it a late batch (a retry stuck in the network, a zombie's send) arriving after its
transaction ended would open a new transaction on the partition that no coordinator knows:
a hanging transaction holding the last stable offset (and compaction) back until someone
aborts it. The question is AddPartitionsToTxn v5 with verify_only, asked of the coordinator
through the inter-broker links (links.py), or of this node's own coordinator without a
request when it is the one. Only the first batch pays: once appended, the transaction is
ongoing in the partition's producer state (storage/producer_state.py) and later batches of
it skip the question, until a marker ends it. A marker written while the question is in
flight drops the producer's verification guard, so a verification that raced the end of
its transaction does not let the batch start a new one (the produce is retried).

Answers to the producer, as Kafka 4.x gives them (its AddPartitionsToTxnManager): a
partition not in the transaction TRANSACTION_ABORTABLE for Produce v11+, INVALID_TXN_STATE
below; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now
(moving, loading, a transaction being ended, a broker unreachable) NOT_ENOUGH_REPLICAS,
which every client retries. `transaction.partition.verification.enable` (default true,
dynamic) turns the question off.

Thread safety: event loop only; owned by the TransactionCoordinator.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from ..coordinator.host import CoordinatorHost
from ..coordinator.internal_topic import partition_of
from ..internal_topics import TXN_TOPIC
from ..protocol import errors
from .links import LINK_ERRORS, BrokerLinks

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 5            # the first that may answer TRANSACTION_ABORTABLE
LocalVerify = Callable[[str, int, int, Iterable[TopicPartition]], set[TopicPartition]]


class PartitionVerifier:
    """Asks the coordinator of a transactional id about partitions (see the module doc)."""

    def __init__(self, host: CoordinatorHost, local_verify: LocalVerify,
                 links: BrokerLinks) -> None:
        self.host = host
        self._local_verify = local_verify
        self._links = links

    @property
    def enabled(self) -> bool:
        # Read on each produce: a dynamic config replaces host.config.
        return bool(self.host.config["transaction.partition.verification.enable"])

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The coordinator's code for each partition, as AddPartitionsToTxn v5 answers it
        (0: in the transaction, TRANSACTION_ABORTABLE: not in it, or the id's refusal)."""
        try:
            coordinator = self._coordinator_of(transactional_id)
            if coordinator == self.host.node_id:
                missing = self._local_verify(transactional_id, producer_id, epoch, partitions)
                return {tp: errors.TransactionAbortable.code if tp in missing else 0
                        for tp in partitions}
            return await self._remote(coordinator, transactional_id, producer_id, epoch,
                                      partitions)
        except errors.KafkaError as exc:
            return {tp: exc.code for tp in partitions}
        except LINK_ERRORS as exc:
            log.info("verifying %s for %r: %s", partitions, transactional_id, exc)
            return {tp: errors.NotEnoughReplicas.code for tp in partitions}

    def _coordinator_of(self, transactional_id: str) -> int:
        image = self.host.image
        index = partition_of(image, TXN_TOPIC, transactional_id,
                             self.host.config["transaction.state.log.num.partitions"])
        part = image.partition(TXN_TOPIC, index)
        if part is None or part.leader < 0:
            raise errors.CoordinatorNotAvailable(
                f"no coordinator for {transactional_id!r} (partition {index})")
        return part.leader

    async def _remote(self, coordinator: int, transactional_id: str, producer_id: int,
                      epoch: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        response = await self._links.request(coordinator, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, {
            "transactions": [{
                "transactional_id": transactional_id, "producer_id": producer_id,
                "producer_epoch": epoch, "verify_only": True,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]})
        if response.error_code:
            return {tp: int(response.error_code) for tp in partitions}
        codes = {tp: errors.UnknownServerError.code for tp in partitions}
        for txn in response.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    codes[(t.name, int(p.partition_index))] = int(p.partition_error_code)
        return codes
