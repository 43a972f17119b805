"""The transactional ids of this node's __transaction_state partitions: loaded, written,
forgotten.

Kafka's TransactionStateManager. An id lives in partition abs(hash(id)) % N of
__transaction_state; the leader of that partition is its coordinator, and the partition's
leader epoch is the coordinator epoch every marker it writes carries (a deposed
coordinator's markers are then refused by the partitions). Each state change is one
record (txn/records.py) appended as leader and replicated to the in-sync replicas before it
is applied in memory and answered: decide, persist, apply. When this node becomes a
partition's leader the partition is read back (the last record of an id wins) and its ids
answer COORDINATOR_LOAD_IN_PROGRESS until then; when it stops leading, its ids are
forgotten (they belong to the new leader).

Owned by the TransactionCoordinator; event loop only. While an id's record is being
replicated the id is `pending`: other requests for it get CONCURRENT_TRANSACTIONS, so no
two changes of one id race.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from typing import Callable, Iterable

from ..coordinator.host import CoordinatorHost
from ..coordinator.internal_topic import led_partition, partition_count, partition_of
from ..coordinator.records import group_partition
from ..internal_topics import TXN_TOPIC
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..records import Record, decode_records, encode_batch, parse_batches
from .metadata import TxnMetadata
from .records import decode_txn_key, decode_txn_value, txn_key, txn_value

log = logging.getLogger(__name__)

# How long a state record may take to reach the in-sync replicas (Kafka's
# transaction.state.log request timeout is the request timeout).
WRITE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Coordinated:
    """An id this node coordinates: its partition and the coordinator epoch."""
    partition: int
    coordinator_epoch: int


def _state_records(plog: object) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record of a state partition (worker thread)."""
    out = []
    for header, batch in plog.batches():   # type: ignore[attr-defined]
        if header.is_control:
            continue
        _, records = decode_records(batch)
        out.extend((rec.offset, rec.key, rec.value) for rec in records if rec.key is not None)
    return out


class TransactionStateManager:
    """Owner of the ids of the state partitions this node leads (see the module doc)."""

    def __init__(self, host: CoordinatorHost, now: Callable[[], int],
                 on_loaded: Callable[[list[TxnMetadata]], None]) -> None:
        self.host = host
        self.now = now
        self._on_loaded = on_loaded
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded: dict[int, int] = {}   # partition -> coordinator epoch it was loaded at
        self.pending: set[str] = set()
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        self._retry: set[int] = set()   # led partitions whose last load did not load them

    def num_partitions(self, image: MetadataImage | None = None) -> int:
        return partition_count(image or self.host.image, TXN_TOPIC, self.host.config["transaction.state.log.num.partitions"])

    def partition_for(self, transactional_id: str, image: MetadataImage | None = None) -> int:
        return partition_of(image or self.host.image, TXN_TOPIC, transactional_id,
                            self.host.config["transaction.state.log.num.partitions"])

    def check_coordinator(self, transactional_id: str) -> Coordinated:
        """The partition and epoch of an id this node may serve, else the error clients
        expect (NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while loading)."""
        if not transactional_id:
            raise errors.InvalidRequest("transactional id is empty")
        p, part = led_partition(self.host.image, TXN_TOPIC, transactional_id,
                                self.host.config["transaction.state.log.num.partitions"],
                                self.host.node_id, "transaction coordinator of")
        epoch = self.loaded.get(p)
        if epoch != part.leader_epoch:
            raise errors.CoordinatorLoadInProgress(f"{TXN_TOPIC}-{p} is loading")
        return Coordinated(p, epoch)

    def still_coordinator(self, transactional_id: str, epoch: int) -> bool:
        try:
            return self.check_coordinator(transactional_id).coordinator_epoch == epoch
        except errors.KafkaError:
            return False

    # -- persistence ----------------------------------------------------------------------

    async def write(self, where: Coordinated, new: TxnMetadata | None,
                    transactional_id: str) -> None:
        """Persist an id's next state (None: a tombstone), wait until every in-sync replica
        has it, then apply it. The id is pending meanwhile; a failure leaves memory as it was
        and raises the coordinator error clients expect."""
        value = txn_value(new) if new is not None else None
        self.pending.add(transactional_id)
        try:
            end, plog = self._append(where.partition, txn_key(transactional_id), value)
            if plog.flush_pending():
                await plog.maybe_flush()
            try:
                await self.host.replication.wait_for_high_watermark(
                    (TXN_TOPIC, where.partition), end, WRITE_TIMEOUT_S)
            except (errors.NotLeaderOrFollower, errors.FencedLeaderEpoch) as exc:
                raise errors.NotCoordinator(str(exc)) from exc
            except errors.KafkaError as exc:
                raise errors.CoordinatorNotAvailable(str(exc)) from exc
            # The partition may have moved (and been reloaded elsewhere) while we waited.
            if self.loaded.get(where.partition) != where.coordinator_epoch:
                raise errors.NotCoordinator(f"{TXN_TOPIC}-{where.partition} moved")
            self._replay(transactional_id, new)
        finally:
            self.pending.discard(transactional_id)

    def _append(self, partition: int, key: bytes, value: bytes | None) -> tuple[int, object]:
        try:
            data = bytearray(encode_batch([Record(0, self.now(), key, value)]))
            _, plog = self.host.replication.append_as_leader(
                TXN_TOPIC, partition, data, parse_batches(data, verify_crc=False))
        except (errors.NotLeaderOrFollower, errors.FencedLeaderEpoch,
                errors.KafkaStorageError) as exc:
            raise errors.NotCoordinator(str(exc)) from exc
        except (errors.UnknownTopicOrPartition, errors.LeaderNotAvailable,
                errors.NotEnoughReplicas) as exc:
            raise errors.CoordinatorNotAvailable(str(exc)) from exc
        return plog.log_end_offset, plog

    def _replay(self, transactional_id: str, m: TxnMetadata | None) -> None:
        if m is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = m

    # -- leadership --------------------------------------------------------------------------

    async def load_led_partitions(self) -> None:
        topic = self.host.image.topics.get(TXN_TOPIC)
        self._load(self.host.image, topic.partitions if topic is not None else ())
        await asyncio.gather(*self._load_tasks.values(), return_exceptions=True)

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        """Load the state partitions this step made ours (or re-elected us for at a new
        epoch), forget those it took away: from the delta only."""
        changed = {p for (topic, p) in delta.partitions if topic == TXN_TOPIC}
        retry, self._retry = self._retry, set()
        if TXN_TOPIC in delta.deleted_topics:
            changed |= set(self.loaded)
        self._forget(new, changed & set(self.loaded))
        self._load(new, changed | retry)

    def _load(self, image: MetadataImage, partitions: Iterable[int]) -> None:
        for p in partitions:
            part = image.partition(TXN_TOPIC, p)
            if part is None or part.leader != self.host.node_id or p in self._load_tasks \
                    or self.loaded.get(p) == part.leader_epoch:
                continue
            task = asyncio.get_running_loop().create_task(self._load_partition(p))
            self._load_tasks[p] = task
            task.add_done_callback(lambda t, p=p: self._load_done(p, t))

    def _load_done(self, p: int, task: "asyncio.Task[None]") -> None:
        self._load_tasks.pop(p, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("loading %s-%d failed", TXN_TOPIC, p, exc_info=task.exception())
        part = self.host.image.partition(TXN_TOPIC, p)
        if p in self.loaded and part is not None and self.loaded[p] != part.leader_epoch:
            # Re-elected at a newer epoch while we read: load again at that epoch.
            self._load(self.host.image, [p])
        elif p not in self.loaded:
            self._retry.add(p)   # no log yet, or moved meanwhile: the next step tries again

    async def _load_partition(self, p: int) -> None:
        plog = self.host.logs.get(TXN_TOPIC, p)
        if plog is None:
            return
        records = await asyncio.to_thread(_state_records, plog)
        part = self.host.image.partition(TXN_TOPIC, p)
        if part is None or part.leader != self.host.node_id:
            return
        state: dict[str, TxnMetadata | None] = {}
        for offset, key, value in records:
            try:
                tid = decode_txn_key(key)
                if tid is not None:
                    state[tid] = decode_txn_value(tid, value) if value is not None else None
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                log.warning("%s-%d offset %d: skipping undecodable record: %r", TXN_TOPIC, p,
                            offset, exc)
        for tid, m in state.items():
            self._replay(tid, m)
        self.loaded[p] = part.leader_epoch
        log.info("loaded %d transactional ids of %s-%d at coordinator epoch %d",
                 sum(m is not None for m in state.values()), TXN_TOPIC, p, part.leader_epoch)
        self._on_loaded([m for m in state.values() if m is not None])

    def _forget(self, image: MetadataImage, partitions: Iterable[int]) -> None:
        for p in partitions:
            part = image.partition(TXN_TOPIC, p)
            if part is not None and part.leader == self.host.node_id \
                    and self.loaded.get(p) == part.leader_epoch:
                continue
            del self.loaded[p]
            n = self.num_partitions(image)
            for tid in [t for t in self.txns if part is None or group_partition(t, n) == p]:
                del self.txns[tid]
