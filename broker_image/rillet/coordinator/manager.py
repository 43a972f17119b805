"""The group coordinator: owns every group whose __consumer_offsets partition this node leads.

A group lives in partition group_partition(group_id, N) of __consumer_offsets;
the leader of that partition is its coordinator. Committed offsets and group
metadata are appended there as records (coordinator/records.py) and the
in-memory state is rebuilt by replaying that partition on start-up, so
compaction + replication of that topic is all the persistence needed.

Decide, then apply: an offset commit is validated against the group, turned
into records, appended, and only then replayed into the group's offsets, by
the same `_replay` that loads a partition on start-up. Group membership is
runtime state owned by the Group state machine; its snapshot (generation,
protocol, leader, members with assignments) is appended on every generation
change and restored on load, so members of a Stable group keep heartbeating
across a broker restart.

Thread-safety: everything runs on the event loop thread. Log appends are
synchronous (PartitionLog never awaits), so no request can interleave between
a group check and the change it guards; only the fsync is awaited.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..controller.topics import TopicSpec
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..tasks import cancel_and_wait
from ..records import Record, decode_records, encode_batch, parse_batches
from .group import (Group, GroupConfig, GroupSnapshot, GroupState, JoinRequest, JoinResult,
                    OffsetAndMetadata, SyncResult)
from .records import (GroupKey, OffsetKey, decode_group_value, decode_key,
                      decode_offset_value, group_key, group_partition, group_value,
                      offset_key, offset_value)

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TICK_INTERVAL_S = 0.1

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class CommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


def _offsets_records(plog: Any) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every keyed record of an offsets partition (worker thread)."""
    out = []
    for header, batch in plog.batches():
        if header.is_control:
            continue
        _, records = decode_records(batch)
        out.extend((rec.offset, rec.key, rec.value) for rec in records if rec.key is not None)
    return out


def _resolver(fut: "asyncio.Future[Any]") -> Callable[[Any], None]:
    """A group callback completing a request's future (ignored if the request is gone)."""
    def resolve(result: Any) -> None:
        if not fut.done():
            fut.set_result(result)
    return resolve


class GroupCoordinator:
    """Owner of all groups on this node; API handlers call it, never the groups directly."""

    def __init__(self, broker: Any, clock: Callable[[], float] = time.time) -> None:
        self.broker = broker
        self._clock = clock
        cfg = broker.config
        self.config = GroupConfig(
            initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
            max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
            max_size=cfg["group.max.size"])
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        self._create_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> int:
        return int(self._clock() * 1000)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._load_led_partitions(self.broker.image)
        # Serve once what we lead at start is loaded; later moves load in the background.
        await asyncio.gather(*self._load_tasks.values(), return_exceptions=True)
        self._tasks = [asyncio.create_task(self._tick_loop()),
                       asyncio.create_task(self._expiry_loop())]

    async def stop(self) -> None:
        self._stop.set()
        await cancel_and_wait(self._tasks)
        for group in self.groups.values():
            # Answer requests still waiting so clients go look for the new coordinator.
            for m in group.members.values():
                if m.join_callback is not None:
                    m.join_callback(JoinResult(errors.NotCoordinator.code, m.member_id))
                    m.join_callback = None
                if m.sync_callback is not None:
                    m.sync_callback(SyncResult(errors.NotCoordinator.code))
                    m.sync_callback = None

    def on_metadata_change(self, old: MetadataImage, new: MetadataImage) -> None:
        self._load_led_partitions(new)
        self._forget_unled_partitions(new)
        deleted = set(old.topics) - set(new.topics)
        if deleted:
            self._drop_offsets_of_deleted_topics(deleted)

    # -- coordinator lookup -------------------------------------------------------

    def num_partitions(self, image: MetadataImage | None = None) -> int:
        topic = (image or self.broker.image).topics.get(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return self.broker.config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.num_partitions())

    async def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets when it is first needed (compacted, internal)."""
        if OFFSETS_TOPIC in self.broker.image.topics:
            return
        async with self._create_lock:
            image = self.broker.image
            if OFFSETS_TOPIC in image.topics:
                return
            cfg = self.broker.config
            live = len(image.live_brokers)
            rf = max(1, min(cfg["offsets.topic.replication.factor"], live))
            if rf < cfg["offsets.topic.replication.factor"]:
                log.warning("creating %s with replication factor %d: only %d live broker(s), "
                            "offsets.topic.replication.factor is %d", OFFSETS_TOPIC, rf, live,
                            cfg["offsets.topic.replication.factor"])
            spec = TopicSpec(OFFSETS_TOPIC, cfg["offsets.topic.num.partitions"], rf, configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                "compression.type": "producer"})
            [result] = await self.broker.channel.create_topics([spec])
            if result.error is not None and not isinstance(result.error,
                                                           errors.TopicAlreadyExists):
                raise errors.CoordinatorNotAvailable(
                    f"cannot create {OFFSETS_TOPIC}: {result.error}")
            log.info("created %s with %d partitions, replication factor %d", OFFSETS_TOPIC,
                     spec.num_partitions, rf)

    async def find_coordinator(self, key: str, listener_name: str | None = None
                               ) -> tuple[int, str, int]:
        """(node id, host, port) of the coordinator of group `key`, as a client of listener
        ``listener_name`` reaches it."""
        await self.ensure_offsets_topic()
        image = self.broker.image
        part = image.partition(OFFSETS_TOPIC, group_partition(key, self.num_partitions(image)))
        if part is None or part.leader not in image.brokers:
            raise errors.CoordinatorNotAvailable(f"no leader for the offsets partition of {key!r}")
        b = image.brokers[part.leader]
        address = b.address(listener_name) if listener_name else (b.host, b.port)
        if address is None:
            raise errors.CoordinatorNotAvailable(
                f"the coordinator of {key!r}, broker {b.node_id}, has no {listener_name} "
                f"listener")
        return b.node_id, *address

    def check_coordinator(self, group_id: str) -> int:
        """The offsets partition of a group this node may serve, else the error clients expect."""
        if not group_id:
            raise errors.InvalidGroupId("group id is empty")
        image = self.broker.image
        if OFFSETS_TOPIC not in image.topics:
            # A client sent here by another node's newer view (it named this node coordinator
            # once the topic was created) meets this node before it applied the topic: this
            # node does not own the group, as far as it knows. NOT_COORDINATOR sends the
            # client back to FindCoordinator, where COORDINATOR_NOT_AVAILABLE made it fail.
            raise errors.NotCoordinator(f"{OFFSETS_TOPIC} is not in node "
                                        f"{self.broker.node_id}'s metadata yet")
        p = group_partition(group_id, self.num_partitions(image))
        part = image.partition(OFFSETS_TOPIC, p)
        if part is None or part.leader != self.broker.node_id:
            raise errors.NotCoordinator(f"node {self.broker.node_id} is not the coordinator "
                                        f"of group {group_id!r}")
        if p not in self.loaded:
            raise errors.CoordinatorLoadInProgress(f"offsets partition {p} is loading")
        return p

    # -- persistence -------------------------------------------------------------

    def _append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> Any:
        """Append records to an offsets partition (synchronous); returns the log to flush.

        Storage errors become the coordinator errors clients expect (as Kafka maps them).
        """
        try:
            now = self.now()
            data = bytearray(encode_batch([Record(i, now, k, v)
                                           for i, (k, v) in enumerate(entries)]))
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

    def _write(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> Any:
        """Append records, then apply them to memory: state never runs ahead of the log.

        Returns the log; the caller awaits its flush (commits) or lets it happen later.
        """
        plog = self._append(partition, entries)
        for key, value in entries:
            self._replay(key, value)
        return plog

    def _persist_group(self, group: Group) -> None:
        p = self.partition_for(group.group_id)
        plog = self._append(p, [(group_key(group.group_id),
                                 group_value(GroupSnapshot.of(group)))])
        self._flush_later(plog)

    def _flush_later(self, plog: Any) -> None:
        if not plog.flush_pending():
            return
        task = asyncio.get_running_loop().create_task(plog.maybe_flush())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _new_group(self, group_id: str) -> Group:
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
                group = self._new_group(decoded.group_id)
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
                group = self._new_group(decoded.group_id)
            snapshot.restore(group, self.now())

    def _load_led_partitions(self, image: MetadataImage) -> None:
        topic = image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return
        for p, part in topic.partitions.items():
            if part.leader == self.broker.node_id and p not in self.loaded \
                    and p not in self._load_tasks:
                task = asyncio.get_running_loop().create_task(self._load_partition(p))
                self._load_tasks[p] = task
                task.add_done_callback(lambda t, p=p: self._loaded(p, t))

    def _loaded(self, p: int, task: "asyncio.Task[None]") -> None:
        self._load_tasks.pop(p, None)
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
        for offset, key, value in records:
            try:
                self._replay(key, value)
                count += 1
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                # One bad record must not keep every group of the partition away.
                log.warning("%s-%d offset %d: skipping undecodable record: %r",
                            OFFSETS_TOPIC, p, offset, exc)
        self.loaded.add(p)
        if count:
            log.info("loaded %d records of %s-%d in %.0f ms (%d groups)", count, OFFSETS_TOPIC,
                     p, (time.monotonic() - started) * 1000, len(self.groups))

    def _forget_unled_partitions(self, image: MetadataImage) -> None:
        """A partition whose leadership moved away: its groups belong to the new leader."""
        for p in list(self.loaded):
            part = image.partition(OFFSETS_TOPIC, p)
            if part is None or part.leader != self.broker.node_id:
                self.loaded.discard(p)
                n = self.num_partitions(image) if part is not None else None
                for gid in [g for g in self.groups
                            if n is None or group_partition(g, n) == p]:
                    self.groups.pop(gid).mark_dead(self.now())

    # -- timers --------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(TICK_INTERVAL_S)
            now = self.now()
            for group in list(self.groups.values()):
                try:
                    group.tick(now)
                except Exception:  # a broken group must not stop every other group's timers
                    log.exception("tick of group %s failed", group.group_id)

    async def _expiry_loop(self) -> None:
        interval = self.broker.config["offsets.retention.check.interval.ms"] / 1000
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            try:
                self.expire_offsets(self.now())
            except Exception:
                log.exception("offset expiration failed")

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
                self._flush_later(self._write(p, entries))
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
            self._flush_later(self._write(p, [(offset_key(gid, t, n), None) for t, n in gone]))

    # -- group membership --------------------------------------------------------------

    async def join_group(self, group_id: str, req: JoinRequest) -> JoinResult:
        self.check_coordinator(group_id)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            raise errors.InvalidSessionTimeout(
                f"session timeout {req.session_timeout_ms} ms is outside "
                f"[{self.config.min_session_timeout_ms}, {self.config.max_session_timeout_ms}]")
        group = self.groups.get(group_id)
        if group is None:
            if req.member_id:
                raise errors.UnknownMemberId(f"group {group_id!r} does not exist")
            group = self._new_group(group_id)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        group.join(req, self.now(), _resolver(fut))
        return await fut

    async def sync_group(self, group_id: str, member_id: str, instance_id: str | None,
                         generation_id: int, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes]) -> SyncResult:
        self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise errors.UnknownMemberId(f"group {group_id!r} does not exist")
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        group.sync(member_id, instance_id, generation_id, protocol_type, protocol_name,
                   assignments, self.now(), _resolver(fut))
        return await fut

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> int:
        self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return errors.UnknownMemberId.code
        return group.heartbeat(member_id, instance_id, generation_id, self.now())

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> list[int]:
        self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise errors.UnknownMemberId(f"group {group_id!r} does not exist")
        now = self.now()
        return [group.leave(mid, iid, now) for mid, iid in members]

    # -- offsets ---------------------------------------------------------------------

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                             generation_id: int, retention_ms: int,
                             entries: list[CommitEntry]) -> dict[TopicPartition, int]:
        """Per-partition error codes; a group-level refusal raises."""
        p = self.check_coordinator(group_id)
        now = self.now()
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise errors.IllegalGeneration(
                    f"group {group_id!r} does not exist; generation {generation_id} is invalid")
            group = self._new_group(group_id)
        group.validate_commit(member_id, instance_id, generation_id, now)
        max_meta = self.broker.config.get("offset.metadata.max.bytes", 4096) or 4096
        image = self.broker.image
        codes: dict[TopicPartition, int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for e in entries:
            if e.metadata is not None and len(e.metadata.encode("utf-8")) > max_meta:
                codes[(e.topic, e.partition)] = errors.OffsetMetadataTooLarge.code
            elif image.partition(e.topic, e.partition) is None:
                codes[(e.topic, e.partition)] = errors.UnknownTopicOrPartition.code
            else:
                expire = now + retention_ms if retention_ms >= 0 else None
                value = offset_value(OffsetAndMetadata(e.offset, e.leader_epoch,
                                                       e.metadata or "", now, expire))
                records.append((offset_key(group_id, e.topic, e.partition), value))
                codes[(e.topic, e.partition)] = 0
        if records:
            plog = self._write(p, records)
            end = plog.log_end_offset
            if plog.flush_pending():  # flush.messages: fsynced before the commit is acked
                await plog.maybe_flush()
            # Acknowledged once every in-sync replica has it, as acks=all: a commit must
            # survive the coordinator's crash.
            try:
                await self.broker.replication.wait_for_high_watermark(
                    (OFFSETS_TOPIC, p), end, self.broker.config["offsets.commit.timeout.ms"] / 1000)
            except errors.NotLeaderOrFollower:
                return {tp: errors.NotCoordinator.code for tp in codes}
            except errors.KafkaError:
                return {tp: (errors.CoordinatorNotAvailable.code if code == 0 else code)
                        for tp, code in codes.items()}
        return codes

    def fetch_offsets(self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets; None for a partition without one. topics None: all of them."""
        self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            return dict(sorted(offsets.items()))
        return {(t, p): offsets.get((t, p)) for t, parts in topics for p in parts}

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> dict[TopicPartition, int]:
        p = self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise errors.GroupIdNotFound(f"group {group_id!r} does not exist")
        if group.state == GroupState.DEAD:
            raise errors.GroupIdNotFound(f"group {group_id!r} does not exist")
        subscribed = set() if group.is_empty() else group.subscribed_topics()
        if subscribed is None:
            raise errors.NonEmptyGroup(f"group {group_id!r} is not empty")
        codes: dict[TopicPartition, int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for topic, parts in topics:
            for part in parts:
                if topic in subscribed:
                    codes[(topic, part)] = errors.GroupSubscribedToTopic.code
                    continue
                codes[(topic, part)] = 0
                if (topic, part) in group.offsets:
                    records.append((offset_key(group_id, topic, part), None))
        if records:
            self._flush_later(self._write(p, records))
        return codes

    # -- admin -------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupOverview]:
        wanted = {s.lower() for s in states}
        n = self.num_partitions()
        out = []
        for gid, group in sorted(self.groups.items()):
            state = group.describe_state()
            if group_partition(gid, n) not in self.loaded or (wanted
                                                              and state.lower() not in wanted):
                continue
            out.append(GroupOverview(gid, group.protocol_type or "", state))
        return out

    def describe_group(self, group_id: str) -> Group | None:
        self.check_coordinator(group_id)
        return self.groups.get(group_id)

    def delete_group(self, group_id: str) -> None:
        p = self.check_coordinator(group_id)
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            raise errors.GroupIdNotFound(f"group {group_id!r} does not exist")
        if not group.is_empty():
            raise errors.NonEmptyGroup(f"group {group_id!r} has members ({group.state.value})")
        entries: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, t, n), None) for t, n in group.offsets]
        entries.append((group_key(group_id), None))
        self._flush_later(self._write(p, entries))
