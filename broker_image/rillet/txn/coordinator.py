"""The transaction coordinator: answers the transactional APIs for every transactional id
whose __transaction_state partition this node leads (KIP-98, KIP-447).

It finds coordinators (creating the topic on first use), hands out producer ids and epochs
(InitProducerId: ids come from the controller's producer-id blocks; each call bumps the
epoch, fencing older producers, and aborts a transaction left open), records the
partitions a transaction writes to (AddPartitionsToTxn, AddOffsetsToTxn) and ends it
(EndTxn): PrepareCommit/PrepareAbort is persisted and answered, then the markers are
written to every partition (markers.py) and CompleteCommit/CompleteAbort persisted. A
coordinator that takes over a partition finishes the transactions it finds prepared. A
timer aborts transactions open longer than their timeout (fencing their producer) and
expires ids idle past transactional.id.expiration.ms.

The transitions are pure (metadata.py); the state and its persistence are the state
manager's (state_manager.py). Thread safety: event loop only; no await separates a
check of an id's state from the write that changes it (the write marks the id pending
before it awaits, and other requests for it get CONCURRENT_TRANSACTIONS).
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Callable, Iterable

from ..client.connection import KafkaClientError
from ..coordinator.host import CoordinatorHost
from ..defs.broker_config import BrokerConfig
from ..coordinator.internal_topic import InternalTopic, coordinator_address
from ..internal_topics import TXN_TOPIC
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..tasks import cancel_and_wait
from ..txn_marker import TxnMarker
from . import metadata as txn
from .links import BrokerLinks
from .markers import MarkerWriter, TopicPartition
from .metadata import NO_PRODUCER_ID, TxnMetadata, TxnState
from .state_manager import Coordinated, TransactionStateManager
from .verification import PartitionVerifier

log = logging.getLogger(__name__)

COMPLETE_RETRY_S = 0.5


def txn_state_rf(cfg: BrokerConfig) -> int:
    """The replication factor __transaction_state is created with. A node that is its own
    one-voter quorum and was not told otherwise uses 1, as Kafka's shipped single-node
    server.properties sets it; any other is the setting (default 3), refused below it."""
    key = "transaction.state.log.replication.factor"
    if len(cfg.quorum_voters) <= 1 and not cfg.is_explicit(key):
        return 1
    return int(cfg[key])


class TransactionCoordinator:
    """Owner of the transactions of this node (see the module doc); API handlers call it.

    ``on_markers_written(marker, partitions)``: markers this node wrote as a partition's
    leader (the group coordinator settles transactional offset commits with it)."""

    def __init__(self, host: CoordinatorHost,
                 on_markers_written: Callable[[TxnMarker, list[TopicPartition]], None],
                 ssl_context: ssl.SSLContext | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self._clock = clock
        cfg = host.config
        self.topic = InternalTopic(
            TXN_TOPIC, cfg["transaction.state.log.num.partitions"], txn_state_rf(cfg),
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
             "unclean.leader.election.enable": "false"},
            "transaction.state.log.replication.factor",
            min_isr=cfg["transaction.state.log.min.isr"], cap_at_live=False)
        self.state = TransactionStateManager(host, self.now, self._resume)
        self.links = BrokerLinks(host, ssl_context)
        self.markers = MarkerWriter(host, on_markers_written, self.links)
        # Links of their own: a WriteTxnMarkers waits for its leader's ISR (up to the
        # replication timeout) and a link answers in order, so a verification queued behind
        # one would hold a producer's first batch past its request timeout.
        self.verify_links = BrokerLinks(host, ssl_context)
        self.verifier = PartitionVerifier(host, self.verify_partitions, self.verify_links)
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> int:
        return int(self._clock() * 1000)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.load_led_partitions()
        self._tasks = [asyncio.create_task(self._timer_loop())]

    async def stop(self) -> None:
        await cancel_and_wait([*self._tasks, *self._completions.values()])
        self._completions.clear()
        await self.links.close()
        await self.verify_links.close()

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        self.state.on_metadata_update(delta, new)

    # -- coordinator lookup --------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str, listener_name: str | None = None
                               ) -> tuple[int, str, int]:
        await self.topic.ensure(self.host)
        image = self.host.image
        return coordinator_address(image, TXN_TOPIC,
                                   self.state.partition_for(transactional_id, image),
                                   transactional_id, listener_name)

    # -- the transactional APIs ----------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected_pid: int = NO_PRODUCER_ID,
                               expected_epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer (see metadata.init_producer)."""
        max_timeout = self.host.config["transaction.max.timeout.ms"]
        if not 0 < timeout_ms <= max_timeout:
            raise errors.InvalidTransactionTimeout(
                f"transaction timeout {timeout_ms} ms is outside (0, {max_timeout}]")
        where, current = self._lookup(transactional_id, must_exist=False)
        new_pid = None
        if current is None or (current.state != TxnState.ONGOING and not txn.can_bump(current)):
            new_pid = await self._allocate_producer_id()
            # The id may have changed while we waited for the controller.
            where, again = self._lookup(transactional_id, must_exist=False)
            if again is not current:
                raise errors.ConcurrentTransactions(f"{transactional_id!r} changed meanwhile")
        if current is None:
            assert new_pid is not None
            new = txn.fresh(transactional_id, new_pid, timeout_ms, self.now())
        else:
            new = txn.init_producer(current, timeout_ms, expected_pid, expected_epoch,
                                    self.now(), new_pid)
        if new is current:   # a retried bump, answered again
            return new.producer_id, new.producer_epoch
        await self.state.write(where, new, transactional_id)
        if new.state == TxnState.PREPARE_ABORT:
            self._complete_later(new, where)
            raise errors.ConcurrentTransactions(
                f"{transactional_id!r}: aborting the transaction left open by epoch "
                f"{current.producer_epoch if current else -1}")
        return new.producer_id, new.producer_epoch

    def unknown_partitions(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        image = self.host.image
        return {tp for tp in partitions if image.partition(*tp) is None}

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition).
        Partitions must exist (the handler checks)."""
        where, current = self._lookup(transactional_id)
        assert current is not None
        new = txn.add_partitions(current, producer_id, epoch, frozenset(partitions), self.now())
        if new is not None:
            await self.state.write(where, new, transactional_id)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """AddPartitionsToTxn verify-only (KIP-890): the partitions that are NOT in the
        ongoing transaction of this producer. A producer that is not the id's current one
        raises INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED, a transaction being ended
        CONCURRENT_TRANSACTIONS, as Kafka's coordinator answers; nothing is written.
        A write in flight for the id (another AddPartitionsToTxn, an AddOffsetsToTxn) does not
        refuse it: the partitions asked about were added before, as clients send a partition's
        batches only once its AddPartitionsToTxn is answered, and refusing would stall every
        batch racing a lazy add (Kafka's coordinator does not check the pending state here)."""
        _, current = self._lookup(transactional_id, allow_pending=True)
        assert current is not None
        if current.producer_id != producer_id:
            raise errors.InvalidProducerIdMapping(
                f"{transactional_id!r} has producer id {current.producer_id}, not {producer_id}")
        if current.producer_epoch != epoch:
            raise errors.ProducerFenced(
                f"{transactional_id!r} is at epoch {current.producer_epoch}, not {epoch}")
        if current.state.preparing:
            raise errors.ConcurrentTransactions(f"{transactional_id!r} is ending its transaction")
        return {tp for tp in partitions if tp not in current.partitions}

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool) -> None:
        """EndTxn: answered once PrepareCommit/PrepareAbort is persisted; markers follow."""
        where, current = self._lookup(transactional_id)
        assert current is not None
        new = txn.end_txn(current, producer_id, epoch, commit, self.now())
        if new is None:
            return
        await self.state.write(where, new, transactional_id)
        self._complete_later(new, where)

    def describe(self, transactional_id: str) -> TxnMetadata:
        _, current = self._lookup(transactional_id, must_exist=False, allow_pending=True)
        if current is None:
            raise errors.TransactionalIdNotFound(f"{transactional_id!r} is not known")
        return current

    def transactions(self) -> list[TxnMetadata]:
        """Every id of the state partitions loaded here."""
        return sorted((m for tid, m in self.state.txns.items()
                       if self.state.partition_for(tid) in self.state.loaded),
                      key=lambda m: m.transactional_id)

    def _lookup(self, transactional_id: str, must_exist: bool = True,
                allow_pending: bool = False) -> tuple[Coordinated, TxnMetadata | None]:
        where = self.state.check_coordinator(transactional_id)
        if transactional_id in self.state.pending and not allow_pending:
            raise errors.ConcurrentTransactions(f"{transactional_id!r} is being updated")
        current = self.state.txns.get(transactional_id)
        if current is None and must_exist:
            raise errors.InvalidProducerIdMapping(
                f"transactional id {transactional_id!r} has no producer id; call "
                f"InitProducerId first")
        return where, current

    async def _allocate_producer_id(self) -> int:
        channel = self.host.channel
        if channel is None:
            raise errors.CoordinatorNotAvailable("the controller channel is not up yet")
        try:
            return await channel.next_producer_id()
        except (errors.KafkaError, KafkaClientError) as exc:
            raise errors.CoordinatorNotAvailable(f"no producer id from the controller: {exc}")

    # -- completion ------------------------------------------------------------------------------

    def _resume(self, loaded: list[TxnMetadata]) -> None:
        """A loaded partition's prepared transactions are finished by this new coordinator."""
        for m in loaded:
            if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                try:
                    where = self.state.check_coordinator(m.transactional_id)
                except errors.KafkaError:
                    continue
                log.info("resuming the %s of %r (producer %d epoch %d)",
                         "commit" if m.commit else "abort", m.transactional_id, m.producer_id,
                         m.producer_epoch)
                self._complete_later(m, where)

    def _complete_later(self, m: TxnMetadata, where: Coordinated) -> None:
        tid = m.transactional_id
        task = asyncio.get_running_loop().create_task(self._complete(m, where))
        self._completions[tid] = task
        task.add_done_callback(lambda t: self._completion_done(tid, t))

    def _completion_done(self, tid: str, task: "asyncio.Task[None]") -> None:
        if self._completions.get(tid) is task:
            del self._completions[tid]
        if not task.cancelled() and task.exception() is not None:
            log.error("completing the transaction of %r failed", tid, exc_info=task.exception())

    async def _complete(self, m: TxnMetadata, where: Coordinated) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort, while this node
        stays the coordinator (else the new one resumes from the Prepare record)."""
        tid = m.transactional_id

        def ours() -> bool:
            return self.state.still_coordinator(tid, where.coordinator_epoch)

        marker = TxnMarker(m.producer_id, m.producer_epoch, m.commit, where.coordinator_epoch)
        if not await self.markers.write(marker, m.partitions, ours):
            return
        while ours() and self.state.txns.get(tid) == m:
            if tid not in self.state.pending:
                try:
                    await self.state.write(where, txn.complete(m, self.now()), tid)
                    return
                except errors.NotCoordinator:
                    return
                except errors.KafkaError as exc:
                    log.info("completing %r: %s; retrying", tid, exc)
            await asyncio.sleep(COMPLETE_RETRY_S)

    # -- timers ----------------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        cfg = self.host.config
        interval = cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        expire_every = cfg["transaction.remove.expired.transaction.cleanup.interval.ms"]
        next_expiry = self.now() + expire_every
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out(self.now())
                if self.now() >= next_expiry:
                    next_expiry = self.now() + expire_every
                    await self.expire_ids(self.now())
            except Exception:
                log.exception("transaction timers failed")

    async def abort_timed_out(self, now: int) -> int:
        """Abort (fencing the producer) every transaction open past its timeout."""
        aborted = 0
        for m in [m for m in self.state.txns.values() if m.expired(now)]:
            tid = m.transactional_id
            try:
                where, current = self._lookup(tid)
                if current is not m:
                    continue
                new = txn.abort_fencing(m, now)
                await self.state.write(where, new, tid)
            except errors.KafkaError as exc:
                log.info("aborting the timed-out transaction of %r: %s", tid, exc)
                continue
            log.info("aborted the transaction of %r (producer %d): open longer than %d ms",
                     tid, m.producer_id, m.timeout_ms)
            self._complete_later(new, where)
            aborted += 1
        return aborted

    async def expire_ids(self, now: int) -> int:
        """transactional.id.expiration.ms: tombstones for ids idle that long."""
        expiration = self.host.config["transactional.id.expiration.ms"]
        expired = 0
        for m in [m for m in self.state.txns.values() if txn.expirable(m, now, expiration)]:
            try:
                where, current = self._lookup(m.transactional_id)
                if current is m:
                    await self.state.write(where, None, m.transactional_id)
                    expired += 1
            except errors.KafkaError as exc:
                log.info("expiring %r: %s", m.transactional_id, exc)
        return expired
