"""The group coordinator: answers the group APIs for every group whose __consumer_offsets
partition this node leads.

It finds coordinators, checks that a group is served here, and turns JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, offset commits/fetches/deletes and the group admin
APIs into calls on the group state machines (group.py), whose records the group
metadata manager (group_metadata.py) appends to __consumer_offsets and replays. Group
membership is runtime state owned by each Group; its snapshot (generation, protocol,
leader, members with assignments) is appended on every generation change and restored
on load, so members of a Stable group keep heartbeating across a broker restart. It
also runs the timers: group deadlines and offset expiration.

Thread-safety: everything runs on the event loop thread. Log appends are
synchronous (PartitionLog never awaits), so no request can interleave between
a group check and the change it guards; only the fsync is awaited.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..internal_topics import OFFSETS_TOPIC
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..steady_clock import steady_clock
from ..tasks import cancel_and_wait
from ..txn_marker import TxnMarker
from .group import Group
from .host import CoordinatorHost
from .internal_topic import InternalTopic, coordinator_address
from .group_metadata import GroupMetadataManager
from .group_types import (CommitEntry, GroupConfig, GroupState, JoinRequest, JoinResult,
                          OffsetAndMetadata, SyncResult)
from .records import group_key, group_partition, offset_key, offset_value

log = logging.getLogger(__name__)

TICK_INTERVAL_S = 0.1

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


def _resolver(fut: "asyncio.Future[Any]") -> Callable[[Any], None]:
    """A group callback completing a request's future (ignored if the request is gone)."""
    def resolve(result: Any) -> None:
        if not fut.done():
            fut.set_result(result)
    return resolve


class GroupCoordinator:
    """Owner of all groups on this node; API handlers call it, never the groups directly."""

    def __init__(self, broker: CoordinatorHost,
                 clock: Callable[[], float] | None = None) -> None:
        self.broker = broker
        # Deadlines must not move with a step of the wall clock (rillet/steady_clock.py).
        self._clock = clock or steady_clock()
        cfg = broker.config
        self.config = GroupConfig(
            initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
            max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
            max_size=cfg["group.max.size"])
        self.store = GroupMetadataManager(broker, self.config, self.now)
        self._offsets_topic = InternalTopic(
            OFFSETS_TOPIC, cfg["offsets.topic.num.partitions"],
            cfg["offsets.topic.replication.factor"],
            {"cleanup.policy": "compact", "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
             "compression.type": "producer"}, "offsets.topic.replication.factor")
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> int:
        return int(self._clock() * 1000)

    @property
    def groups(self) -> dict[str, Group]:
        """Every group of a partition loaded (or loading) here, by id (the store's)."""
        return self.store.groups

    @property
    def loaded(self) -> set[int]:
        """The offsets partitions whose groups are loaded here."""
        return self.store.loaded

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        self.store.on_metadata_update(delta, new)

    def num_partitions(self, image: MetadataImage | None = None) -> int:
        return self.store.num_partitions(image)

    def partition_for(self, group_id: str) -> int:
        return self.store.partition_for(group_id)

    def check_coordinator(self, group_id: str) -> int:
        """The offsets partition of a group this node may serve, else the error clients expect."""
        return self.store.check_coordinator(group_id)

    def expire_offsets(self, now: int) -> int:
        return self.store.expire_offsets(now)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        # Serve once what we lead at start is loaded; later moves load in the background.
        await self.store.load_led_partitions()
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

    # -- coordinator lookup -------------------------------------------------------

    async def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets when it is first needed (compacted, internal)."""
        await self._offsets_topic.ensure(self.broker)

    async def find_coordinator(self, key: str, listener_name: str | None = None
                               ) -> tuple[int, str, int]:
        """(node id, host, port) of the coordinator of group `key`, as a client of listener
        ``listener_name`` reaches it."""
        await self.ensure_offsets_topic()
        image = self.broker.image
        return coordinator_address(image, OFFSETS_TOPIC,
                                   group_partition(key, self.num_partitions(image)), key,
                                   listener_name)

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
            group = self.store.new_group(group_id)
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
        self._group_for_commit(group_id, member_id, instance_id, generation_id)
        codes, records = self._offset_records(group_id, entries, retention_ms)
        if records:
            return await self._replicated(p, self.store.write(p, records), codes)
        return codes

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, instance_id: str | None, generation_id: int,
                                 entries: list[CommitEntry]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets committed inside a transaction, applied by its COMMIT
        marker and dropped by its ABORT (txn_offsets.py). A member's generation is checked
        when given (KIP-447); an older epoch of the producer is fenced."""
        p = self.check_coordinator(group_id)
        self.store.txn_offsets.check(producer_id, producer_epoch)
        if generation_id >= 0 or member_id:
            self._group_for_commit(group_id, member_id, instance_id, generation_id)
        elif group_id not in self.groups:   # a client without group metadata (v0-2)
            self.store.new_group(group_id)
        codes, records = self._offset_records(group_id, entries, -1)
        if records:
            plog = self.store.write_txn(p, producer_id, producer_epoch, records)
            return await self._replicated(p, plog, codes)
        return codes

    def on_txn_markers(self, marker: TxnMarker, partitions: Iterable[TopicPartition]) -> None:
        """Markers written on partitions this node leads: those of __consumer_offsets settle
        the transactional offset commits of their producer."""
        for topic, p in partitions:
            if topic == OFFSETS_TOPIC:
                self.store.on_txn_marker(p, marker)

    def _group_for_commit(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise errors.IllegalGeneration(
                    f"group {group_id!r} does not exist; generation {generation_id} is invalid")
            group = self.store.new_group(group_id)
        group.validate_commit(member_id, instance_id, generation_id, self.now())
        return group

    def _offset_records(self, group_id: str, entries: list[CommitEntry], retention_ms: int
                        ) -> tuple[dict[TopicPartition, int], list[tuple[bytes, bytes | None]]]:
        """Each entry's code and the records of those accepted."""
        now = self.now()
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
        return codes, records

    async def _replicated(self, p: int, plog: Any, codes: dict[TopicPartition, int]
                          ) -> dict[TopicPartition, int]:
        """Answer a commit once every in-sync replica has it, as acks=all: a commit must
        survive the coordinator's crash."""
        end = plog.log_end_offset
        if plog.flush_pending():  # flush.messages: fsynced before the commit is acked
            await plog.maybe_flush()
        try:
            await self.broker.replication.wait_for_high_watermark(
                (OFFSETS_TOPIC, p), end, self.broker.config["offsets.commit.timeout.ms"] / 1000)
        except errors.NotLeaderOrFollower:
            return {tp: errors.NotCoordinator.code for tp in codes}
        except errors.KafkaError:
            return {tp: (errors.CoordinatorNotAvailable.code if code == 0 else code)
                    for tp, code in codes.items()}
        return codes

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with an offset commit in an open transaction (OffsetFetch
        with require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        return self.store.txn_offsets.pending_for(group_id)

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
            self.store.flush_later(self.store.write(p, records))
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
        self.store.flush_later(self.store.write(p, entries))
