"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447) waiting for their
transaction to end.

A transactional producer commits its consumer's offsets inside its transaction: the group
coordinator appends them to the group's __consumer_offsets partition as a transactional
batch of the producer (so the partition's log holds them like any transactional write) and
keeps them here, per offsets partition and producer id, invisible to OffsetFetch. The
transaction's marker on that partition settles them: COMMIT makes them the group's committed
offsets, ABORT drops them. Loading a partition replays the same way (batches, then markers),
so a new coordinator knows what is still pending.

Fencing: the log does not check the epoch of a batch without sequence numbers, so the
newest epoch seen of each producer (from its commits and its markers) is kept here and an
older one is refused, as Kafka's coordinator refuses a zombie's offsets. That memory is
bounded as Kafka bounds its producer state: a producer with nothing pending here is forgotten
once unseen for transactional.id.expiration.ms (by then the transaction coordinator has
expired its id too, and a zombie's AddOffsetsToTxn is refused there first), and beyond
MAX_PRODUCERS producers the longest unseen of those is forgotten early.

Owned by the GroupMetadataManager; event loop only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..protocol import errors
from .group_types import OffsetAndMetadata

# (group id, topic, partition)
OffsetKey = tuple[str, str, int]
MAX_PRODUCERS = 100_000
DEFAULT_EXPIRATION_MS = 604_800_000   # transactional.id.expiration.ms's default


@dataclass(frozen=True)
class SeenEpoch:
    epoch: int
    at_ms: int


def _no_clock() -> int:
    return 0


@dataclass
class PendingTxnOffsets:
    now: Callable[[], int] = _no_clock            # milliseconds, steady
    expiration_ms: int = DEFAULT_EXPIRATION_MS
    max_producers: int = MAX_PRODUCERS
    # offsets partition -> producer id -> the offsets its open transaction committed
    by_partition: dict[int, dict[int, dict[OffsetKey, OffsetAndMetadata]]] = field(
        default_factory=dict)
    # producer id -> newest epoch and when last seen; ordered least recently seen first
    epochs: dict[int, SeenEpoch] = field(default_factory=dict)

    def check(self, producer_id: int, epoch: int) -> None:
        seen = self.epochs.get(producer_id)
        if seen is not None and epoch < seen.epoch:
            raise errors.ProducerFenced(
                f"producer {producer_id} epoch {epoch} is fenced by epoch {seen.epoch}")

    def _saw(self, producer_id: int, epoch: int) -> None:
        now = self.now()
        old = self.epochs.pop(producer_id, None)
        self.epochs[producer_id] = SeenEpoch(max(epoch, old.epoch if old else -1), now)
        self._prune(now)

    def _prune(self, now: int) -> None:
        """Forget the least recently seen producers without pending offsets: those unseen
        past the expiration, and the oldest beyond ``max_producers``."""
        if not self.epochs:
            return
        oldest = next(iter(self.epochs.values()))
        if len(self.epochs) <= self.max_producers and now - oldest.at_ms <= self.expiration_ms:
            return   # the common case: nothing to forget, decided in O(1)
        pending = {pid for producers in self.by_partition.values() for pid in producers}
        for pid in list(self.epochs):
            seen = self.epochs[pid]
            if len(self.epochs) <= self.max_producers and now - seen.at_ms <= self.expiration_ms:
                break
            if pid not in pending:
                del self.epochs[pid]

    def add(self, partition: int, producer_id: int, epoch: int, key: OffsetKey,
            value: OffsetAndMetadata | None) -> None:
        """One offset record of a transactional batch (None: a tombstone, ignored)."""
        self._saw(producer_id, epoch)
        if value is not None:
            self.by_partition.setdefault(partition, {}).setdefault(producer_id, {})[key] = value

    def end(self, partition: int, producer_id: int, epoch: int, commit: bool
            ) -> dict[OffsetKey, OffsetAndMetadata]:
        """A marker on ``partition``: what to apply (nothing when it aborted)."""
        self._saw(producer_id, epoch)
        offsets = self.by_partition.get(partition, {}).pop(producer_id, {})
        return offsets if commit else {}

    def pending_for(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of ``group_id`` with an offset commit in an open transaction."""
        return {(t, p) for producers in self.by_partition.values()
                for offsets in producers.values() for (g, t, p) in offsets if g == group_id}

    def forget(self, partition: int) -> None:
        """The offsets partition is no longer led here."""
        self.by_partition.pop(partition, None)
