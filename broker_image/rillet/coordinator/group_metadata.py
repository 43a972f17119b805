"""The groups of this node's __consumer_offsets partitions: loaded, stored, forgotten.

Kafka's GroupMetadataManager. A group lives in partition group_partition(group_id, N)
of __consumer_offsets; the leader of that partition is its coordinator. Committed
offsets and group metadata are appended there as records (coordinator/records.py) and
the in-memory groups are rebuilt by replaying the partition when this node becomes its
leader, so compaction + replication of that topic is all the persistence needed.
Metadata deltas say which partitions this node now leads (load them) or no longer
leads (forget their groups), and which topics went (drop their offsets). Offsets past
their retention are expired here too.

Decide, then apply: records are appended, and only then replayed into the groups by
the same `_replay` that loads a partition. Transactional offset commits are appended as
their producer's transactional batches and wait in txn_offsets.py for the marker that
settles them, live and on load alike.

Owned by the GroupCoordinator (which handles the requests); event loop only. Log
appends are synchronous (PartitionLog never awaits), so no request interleaves between
a group check and the change it guards; only the fsync is awaited.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any, Callable, Iterable

from ..internal_topics import OFFSETS_TOPIC
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..records import BatchHeader, Record, decode_records, encode_batch, parse_batches
from ..txn_marker import TxnMarker, decode_marker
from .group import Group
from .host import CoordinatorHost
from .internal_topic import led_partition, partition_count, partition_of
from .group_snapshot import GroupSnapshot
from .group_types import GroupConfig, GroupState, OffsetAndMetadata
from .txn_offsets import DEFAULT_EXPIRATION_MS, PendingTxnOffsets
from .records import (GroupKey, OffsetKey, decode_group_value, decode_key,
                      decode_offset_value, group_key, group_partition, group_value,
                      offset_key)

log = logging.getLogger(__name__)


# (offset, key, value, its batch's header, the marker a control batch carries)
LoadedRecord = tuple[int, bytes | None, bytes | None, BatchHeader, TxnMarker | None]


def _offsets_records(plog: Any) -> list[LoadedRecord]:
    """Every keyed record and every transaction marker of an offsets partition, in log
    order (worker thread)."""
    out: list[LoadedRecord] = []
    for header, batch in plog.batches():
        if header.is_control:
            marker = decode_marker(header, batch)
            if marker is not None:
                out.append((header.base_offset, None, None, header, marker))
            continue
        _, records = decode_records(batch)
        out.extend((rec.offset, rec.key, rec.value, header, None)
                   for rec in records if rec.key is not None)
    return out


class GroupMetadataManager:
    """Owner of the groups of the offsets partitions this node leads (see the module doc)."""

    def __init__(self, broker: CoordinatorHost, config: GroupConfig, now: Callable[[], int]) -> None:
        self.broker = broker
        self.config = config
        self.now = now
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        self._retry: set[int] = set()   # led partitions whose last load did not load them
        self.txn_offsets = PendingTxnOffsets(
            now, broker.config.get("transactional.id.expiration.ms", DEFAULT_EXPIRATION_MS))
        # Markers that reached a partition while it was loading: applied once it is loaded.
        self._deferred_markers: dict[int, list[TxnMarker]] = {}

    async def load_led_partitions(self) -> None:
        """Load every partition this node leads (start-up: the one pass over the topic)."""
        image = self.broker.image
        topic = image.topics.get(OFFSETS_TOPIC)
        self._load_led_partitions(image, topic.partitions if topic is not None else ())
        await asyncio.gather(*self._load_tasks.values(), return_exceptions=True)

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        """Load the offsets partitions this step made ours, forget the ones it took away,
        drop the offsets of deleted topics: from the delta, never a walk over the image."""
        changed = {p for (topic, p) in delta.partitions if topic == OFFSETS_TOPIC}
        # A load that ended without loading (leadership moved meanwhile, no log, an error)
        # is tried again on the next step, as a pass over every partition would.
        retry, self._retry = self._retry, set()
        self._load_led_partitions(new, changed | retry)
        if OFFSETS_TOPIC in delta.deleted_topics:
            changed |= self.loaded   # the topic went: every loaded partition is checked
        self._forget_unled_partitions(new, changed & self.loaded)
        deleted = {name for name in delta.deleted_topics if name not in new.topics}
        if deleted:
            self._drop_offsets_of_deleted_topics(deleted)

    def num_partitions(self, image: MetadataImage | None = None) -> int:
        return partition_count(image or self.broker.image, OFFSETS_TOPIC, self.broker.config["offsets.topic.num.partitions"])

    def partition_for(self, group_id: str) -> int:
        return partition_of(self.broker.image, OFFSETS_TOPIC, group_id,
                            self.broker.config["offsets.topic.num.partitions"])

    def check_coordinator(self, group_id: str) -> int:
        """The offsets partition of a group this node may serve, else the error clients expect."""
        if not group_id:
            raise errors.InvalidGroupId("group id is empty")
        p, _ = led_partition(self.broker.image, OFFSETS_TOPIC, group_id,
                             self.broker.config["offsets.topic.num.partitions"],
                             self.broker.node_id, "coordinator of group")
        if p not in self.loaded:
            raise errors.CoordinatorLoadInProgress(f"offsets partition {p} is loading")
        return p

    # -- persistence -------------------------------------------------------------

    def _append(self, partition: int, entries: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> Any:
        """Append records to an offsets partition (synchronous); returns the log to flush.
        ``producer`` (id, epoch): as that producer's transactional batch.

        Storage errors become the coordinator errors clients expect (as Kafka maps them).
        """
        try:
            now = self.now()
            pid, epoch = producer or (-1, -1)
            data = bytearray(encode_batch([Record(i, now, k, v)
                                           for i, (k, v) in enumerate(entries)],
                                          producer_id=pid, producer_epoch=epoch,
                                          is_transactional=producer is not None))
            _, plog = self.broker.replication.append_as_leader(OFFSETS_TOPIC, partition, data,
                                                   parse_batches(data, verify_crc=False))
        except (errors.NotLeaderOrFollower, errors.FencedLeaderEpoch) as exc:
            raise errors.NotCoordinator(str(exc)) from exc
        except (errors.UnknownTopicOrPartition, errors.LeaderNotAvailable,
                errors.NotEnoughReplicas) as exc:
            raise errors.CoordinatorNotAvailable(str(exc)) from exc
        except (errors.MessageTooLarge, errors.RecordListTooLarge) as exc:
            raise errors.InvalidCommitOffsetSize(str(exc)) from exc
        return plog

    def write(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> Any:
        """Append records, then apply them to memory: state never runs ahead of the log.

        Returns the log; the caller awaits its flush (commits) or lets it happen later.
        """
        plog = self._append(partition, entries)
        for key, value in entries:
            self._replay(key, value)
        return plog

    def write_txn(self, partition: int, producer_id: int, epoch: int,
                  entries: list[tuple[bytes, bytes | None]]) -> Any:
        """Append a producer's transactional offset commits; they wait for its marker."""
        plog = self._append(partition, entries, (producer_id, epoch))
        for key, value in entries:
            self._replay_txn(partition, producer_id, epoch, key, value)
        return plog

    def on_txn_marker(self, partition: int, marker: TxnMarker) -> None:
        """A transaction marker written on an offsets partition this node leads."""
        if partition in self.loaded:
            self._end_txn(partition, marker)
        elif partition in self._load_tasks:
            self._deferred_markers.setdefault(partition, []).append(marker)

    def _replay_txn(self, partition: int, producer_id: int, epoch: int, key: bytes,
                    value: bytes | None) -> None:
        decoded = decode_key(key)
        if isinstance(decoded, OffsetKey):
            self.txn_offsets.add(partition, producer_id, epoch,
                                 (decoded.group_id, decoded.topic, decoded.partition),
                                 decode_offset_value(value) if value is not None else None)

    def _end_txn(self, partition: int, marker: TxnMarker) -> None:
        settled = self.txn_offsets.end(partition, marker.producer_id, marker.producer_epoch,
                                       marker.commit)
        for (group_id, topic, p), offset in settled.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.new_group(group_id)
            group.offsets[(topic, p)] = offset

    def _persist_group(self, group: Group) -> None:
        p = self.partition_for(group.group_id)
        plog = self._append(p, [(group_key(group.group_id),
                                 group_value(GroupSnapshot.of(group)))])
        self.flush_later(plog)

    def flush_later(self, plog: Any) -> None:
        if not plog.flush_pending():
            return
        task = asyncio.get_running_loop().create_task(plog.maybe_flush())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.config, self.now(), self._persist_group)
        self.groups[group_id] = group
        return group

    def _replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one __consumer_offsets record (load and live commits alike)."""
        decoded = decode_key(key)
        if isinstance(decoded, OffsetKey):
            group = self.groups.get(decoded.group_id)
            tp = (decoded.topic, decoded.partition)
            if value is None:
                if group is not None:
                    group.offsets.pop(tp, None)
                return
            offset = decode_offset_value(value)
            if group is None:
                group = self.new_group(decoded.group_id)
            group.offsets[tp] = offset
        elif isinstance(decoded, GroupKey):
            group = self.groups.get(decoded.group_id)
            if value is None:
                if group is not None:
                    group.mark_dead(self.now())
                    del self.groups[decoded.group_id]
                return
            snapshot = decode_group_value(value)
            if group is None:
                group = self.new_group(decoded.group_id)
            snapshot.restore(group, self.now())

    def _load_led_partitions(self, image: MetadataImage, partitions: Iterable[int]) -> None:
        """Start loading those of `partitions` this node leads and has not loaded."""
        for p in partitions:
            part = image.partition(OFFSETS_TOPIC, p)
            if part is not None and part.leader == self.broker.node_id \
                    and p not in self.loaded and p not in self._load_tasks:
                task = asyncio.get_running_loop().create_task(self._load_partition(p))
                self._load_tasks[p] = task
                task.add_done_callback(lambda t, p=p: self._loaded(p, t))

    def _loaded(self, p: int, task: "asyncio.Task[None]") -> None:
        self._load_tasks.pop(p, None)
        if p not in self.loaded:
            self._retry.add(p)
            self._deferred_markers.pop(p, None)   # the next load reads them from the log
        if not task.cancelled() and task.exception() is not None:
            log.error("loading %s-%d failed", OFFSETS_TOPIC, p, exc_info=task.exception())

    async def _load_partition(self, p: int) -> None:
        """Read the partition in a worker thread (it may be large), then apply it here.

        Until it is applied the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        plog = self.broker.logs.get(OFFSETS_TOPIC, p)
        if plog is None:
            return
        started = time.monotonic()
        records = await asyncio.to_thread(_offsets_records, plog)
        part = self.broker.image.partition(OFFSETS_TOPIC, p)
        if part is None or part.leader != self.broker.node_id:
            return   # leadership moved on while we read
        count = 0
        for offset, key, value, header, marker in records:
            try:
                if marker is not None:
                    self._end_txn(p, marker)
                elif header.is_transactional:
                    assert key is not None
                    self._replay_txn(p, header.producer_id, header.producer_epoch, key, value)
                else:
                    assert key is not None
                    self._replay(key, value)
                count += 1
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                # One bad record must not keep every group of the partition away.
                log.warning("%s-%d offset %d: skipping undecodable record: %r",
                            OFFSETS_TOPIC, p, offset, exc)
        self.loaded.add(p)
        for marker in self._deferred_markers.pop(p, []):
            self._end_txn(p, marker)
        if count:
            log.info("loaded %d records of %s-%d in %.0f ms (%d groups)", count, OFFSETS_TOPIC,
                     p, (time.monotonic() - started) * 1000, len(self.groups))

    def _forget_unled_partitions(self, image: MetadataImage, partitions: Iterable[int]) -> None:
        """A partition whose leadership moved away: its groups belong to the new leader."""
        for p in sorted(partitions):
            part = image.partition(OFFSETS_TOPIC, p)
            if part is None or part.leader != self.broker.node_id:
                self.loaded.discard(p)
                self.txn_offsets.forget(p)
                n = self.num_partitions(image) if part is not None else None
                for gid in [g for g in self.groups
                            if n is None or group_partition(g, n) == p]:
                    self.groups.pop(gid).mark_dead(self.now())

    def expire_offsets(self, now: int) -> int:
        """offsets.retention.minutes: drop offsets of empty groups (and standalone commits)."""
        retention = self.broker.config["offsets.retention.minutes"] * 60000
        removed = 0
        for gid, group in list(self.groups.items()):
            expired = [tp for tp, o in group.offsets.items()
                       if self._is_expired(group, o, now, retention)]
            if not expired and not (group.is_empty() and not group.offsets):
                continue
            try:
                p = self.check_coordinator(gid)
            except errors.KafkaError:
                continue
            entries: list[tuple[bytes, bytes | None]] = [
                (offset_key(gid, t, part), None) for t, part in expired]
            if group.is_empty() and len(group.offsets) == len(expired):
                entries.append((group_key(gid), None))
            try:
                self.flush_later(self.write(p, entries))
            except errors.KafkaError as exc:  # this group waits for the next pass
                log.warning("expiring offsets of group %s failed: %s", gid, exc)
                continue
            removed += len(expired)
        return removed

    @staticmethod
    def _is_expired(group: Group, o: OffsetAndMetadata, now: int, retention: int) -> bool:
        if o.expire_timestamp is not None:
            return now >= o.expire_timestamp
        if group.protocol_type is None:
            return now >= o.commit_timestamp + retention
        if group.state == GroupState.EMPTY:
            return now >= group.state_timestamp + retention
        return False

    def _drop_offsets_of_deleted_topics(self, topics: set[str]) -> None:
        for gid, group in list(self.groups.items()):
            gone = [tp for tp in group.offsets if tp[0] in topics]
            if not gone:
                continue
            try:
                p = self.check_coordinator(gid)
            except errors.KafkaError:
                continue
            self.flush_later(self.write(p, [(offset_key(gid, t, n), None) for t, n in gone]))
