"""The replica manager: leader and follower roles of this broker's partitions.

For every partition this broker hosts, the metadata image says who leads. As leader it
is the one way to a led partition's log (leadership and leader-epoch checks), appends to it
(with the min.insync.replicas checks), keeps a PartitionLeaderState (follower progress,
high watermark, ISR decisions) and holds both waiting queues (purgatory.py): acks=all
produce requests until the high watermark passes them, fetches until new data arrives. As
follower it hands the partition to the fetcher of its leader (one ReplicaFetcher per source
broker).

Every move of a hosted log (its end, high watermark or log start: the LogManager passes
the log's own notification on) reaches the followers' fetch sessions of a led partition
(session_news.py) and the fetcher of a followed one, so neither side of a follower fetch
walks every partition to find what moved.

ISR changes go to the controller through the AlterPartitionManager (many partitions per
AlterPartition request); they take effect when committed to the metadata log and replayed
here, like every other metadata change. The periodic ISR check looks only at the led
partitions whose next check came (a DeadlineQueue): a partition with its whole replica set
in sync cannot need a shrink before the oldest follower's last caught-up time plus
replica.lag.time.max.ms (leader.py, `next_isr_check_ms`); a new leadership, a metadata
change of the partition and a refused change schedule a check at the next pass.

Owned by the broker; event loop only.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Any, Callable, Hashable, Iterable

from ..controller.isr import IsrChange
from ..deadlines import DeadlineQueue
from ..defs.broker_config import BrokerConfig
from ..metadata.delta import MetadataDelta, from_empty
from ..metadata.image import MetadataImage, PartitionInfo
from ..metadata.view import MetadataView
from ..protocol import errors
from ..records import BatchHeader
from ..storage.log import AppendInfo, PartitionLog
from ..storage.log_dir_failure import LogDirFailure
from ..storage.manager import LogManager
from ..tasks import cancel_and_wait
from .alter_partition_manager import AlterPartitionManager, IsrChannel, proves_not_committed
from .fetch_sessions import FetchSessionCache
from .fetcher import FollowerSide, ReplicaFetcher
from .leader import PartitionLeaderState
from .min_insync import MinInsyncReplicas
from .purgatory import AcksWaiters, FetchWaiters
from .read_replica import ConsumerFetchCounters
from .session_news import SessionNews
from .throttle import ReplicationThrottles

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


def now_ms() -> float:
    return time.monotonic() * 1000


def _ranges(numbers: list[int]) -> str:
    """Sorted [0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def leadership_summary(led: Iterable[tuple[TopicPartition, int]]) -> str:
    """One line for the partitions a broker took the lead of in one metadata step:
    "3 partitions: __consumer_offsets [0-1] (epoch 0), t [4] (epoch 2)"."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), epoch in led:
        by_topic.setdefault(topic, []).append((partition, epoch))
    parts = []
    for topic in sorted(by_topic):
        entries = sorted(by_topic[topic])
        epochs = sorted({e for _, e in entries})
        epoch = (f"epoch {epochs[0]}" if len(epochs) == 1
                 else f"epochs {epochs[0]}-{epochs[-1]}")
        parts.append(f"{topic} [{_ranges([p for p, _ in entries])}] ({epoch})")
    count = sum(len(v) for v in by_topic.values())
    return f"{count} partition{'s' if count != 1 else ''}: {', '.join(parts)}"


class ReplicaManager:
    def __init__(self, node_id: int, config: Callable[[], BrokerConfig],
                 metadata: MetadataView, logs: LogManager,
                 broker_tls: ssl.SSLContext | None) -> None:
        """`config`: the broker's current config (dynamic configs replace it); `metadata`:
        this node's image; `logs`: the partition logs this broker hosts."""
        self.node_id = node_id
        self._config = config
        self.config = config()   # as started: replica.lag.time.max.ms is static
        self.metadata = metadata
        self.logs = logs
        # ISR changes on their way to the controller (the channel comes with attach).
        self.alter_partitions = AlterPartitionManager(node_id, self._wants_isr_change,
                                                      self._isr_change_refused)
        self.leaders: dict[TopicPartition, PartitionLeaderState] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.throttles = ReplicationThrottles(self.node_id)
        self._following: dict[TopicPartition, int] = {}   # tp -> leader id
        self._acks = AcksWaiters()      # acks=all produce, until the high watermark
        self._fetches = FetchWaiters()  # fetches short of fetch.min.bytes
        self._min_insync = MinInsyncReplicas()   # per topic, for acks=all
        self._isr_task: asyncio.Task[None] | None = None
        self._isr_checks: DeadlineQueue[TopicPartition] = DeadlineQueue()  # led: next check
        self.consumer_fetches = ConsumerFetchCounters()   # what consumers were served here
        self.fetch_sessions = FetchSessionCache()   # followers' sessions with this leader
        self.session_news = SessionNews(self.fetch_sessions, logs, self.leaders,
                                        self.on_follower_fetch, self._fetches.wake, now_ms)
        logs.on_moved(self._log_moved)
        self._follower_side = FollowerSide(node_id, config, logs, self.throttles.follower,
                                           self.wake, broker_tls)
        self._started = False
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, channel: IsrChannel) -> None:
        self.alter_partitions.attach(channel)

    def start(self) -> None:
        """Take up the roles the image gives us (after catch-up, logs in place)."""
        self.adopt(self.metadata.image)
        self.alter_partitions.start()
        self._isr_task = asyncio.create_task(self._isr_loop())

    def adopt(self, image: MetadataImage) -> None:
        """Take up the roles `image` gives this broker (no ISR checks: see start)."""
        self._started = True
        # The one full pass: every role in `image`, as a change from the empty image.
        self.on_metadata_update(from_empty(image, self.node_id), image)

    async def stop(self) -> None:
        self._stopped = True
        await cancel_and_wait([self._isr_task])
        await self.alter_partitions.stop()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        self._acks.fail_all(errors.NotLeaderOrFollower("the broker is shutting down"))

    # -- roles from metadata -----------------------------------------------------------------

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        """Take up the roles one committed step changed (its delta's local changes)."""
        # The broker's config already reflects `new` (the broker's listener runs first).
        self.throttles.update(delta, self._config())
        if not self._started or self._stopped:
            return
        local = delta.local
        # Dropped first: a topic deleted and created again under its name in one step
        # starts from a fresh role, not from the old topic's leader state.
        for tp in local.deleted | local.moved_away:
            self._drop(tp)
        self._take_up_roles([*local.leaders.items(), *local.followers.items()], new)
        # A broker that comes back: partitions we follow from it resume.
        for node_id in delta.brokers:
            fetcher = self.fetchers.get(node_id)
            broker = new.brokers.get(node_id)
            if fetcher is not None and broker is not None:
                fetcher.set_address(broker.host, broker.port)

    def take_up(self, tps: Iterable[TopicPartition]) -> None:
        """The logs of `tps` were created after their metadata step (log_creator.py): take
        up the roles the current image gives this broker for them."""
        if not self._started or self._stopped:
            return
        image = self.metadata.image
        roles = [(tp, part) for tp in tps
                 if (part := image.partition(*tp)) is not None and self.node_id in part.replicas]
        self._take_up_roles(roles, image)

    def _take_up_roles(self, roles: list[tuple[TopicPartition, PartitionInfo]],
                       image: MetadataImage) -> None:
        led: list[tuple[TopicPartition, int]] = []   # (partition, leader epoch) taken up now
        for tp, part in roles:
            if self._apply(tp, part, image):
                led.append((tp, part.leader_epoch))
        if led:
            # One line per metadata step: the first group use alone makes this broker
            # leader of up to 50 __consumer_offsets partitions at once.
            log.info("leader of %s", leadership_summary(led))

    def _log_moved(self, tp: TopicPartition) -> None:
        """The log of `tp` moved (end, high watermark or log start): news for the fetch
        sessions holding it as leader, a new fetch position as follower."""
        self.session_news.moved(tp)
        source = self._following.get(tp)
        if source is not None and source in self.fetchers:
            self.fetchers[source].moved(tp)

    def _apply(self, tp: TopicPartition, part: PartitionInfo, image: MetadataImage) -> bool:
        """Take up this broker's role for `tp`; True when it became the leader just now."""
        self.session_news.moved(tp)   # before the leader state changes (session_news.py)
        if self.logs.offline_dir_of(*tp) is not None:
            return False   # its log dir failed: no role until a restart on a repaired disk
        if part.leader == self.node_id:
            self._stop_following(tp)
            state = self.leaders.get(tp)
            if state is None or state.leader_epoch != part.leader_epoch:
                return self._become_leader(tp, part)
            if state.partition_epoch != part.partition_epoch:
                # Only a change of this partition: a sibling's change must not drop our
                # pending ISR (the high watermark would then pass a replica that may be
                # joining the ISR right now, and may lead next).
                state.update_metadata(part.partition_epoch, part.replicas, part.isr, now_ms())
                self._isr_checks.schedule(tp, 0)   # new replicas or ISR: look at the next pass
                self._advance(tp, state)
            return False
        if tp in self.leaders:
            del self.leaders[tp]
            self._acks.fail(tp, errors.NotLeaderOrFollower(
                f"{tp[0]}-{tp[1]}: leadership moved to {part.leader}"))
        self._stop_following(tp)
        broker = image.brokers.get(part.leader)
        if part.leader >= 0 and broker is not None:
            fetcher = self.fetchers.get(part.leader)
            if fetcher is None:
                fetcher = self.fetchers[part.leader] = ReplicaFetcher(
                    self._follower_side, part.leader, broker.host, broker.port)
                fetcher.start()
            fetcher.add(tp, part.leader_epoch)
            self._following[tp] = part.leader
        return False

    def _become_leader(self, tp: TopicPartition, part: PartitionInfo) -> bool:
        plog = self.logs.get(*tp)
        if plog is None:
            return False
        state = PartitionLeaderState.become_leader(
            self.node_id, part.leader_epoch, part.partition_epoch, part.replicas, part.isr,
            plog.log_end_offset, plog.high_watermark, now_ms())
        self.leaders[tp] = state
        self._isr_checks.schedule(tp, 0)
        log.debug("%s-%d: leader in epoch %d (ISR %s)", tp[0], tp[1], part.leader_epoch,
                  list(part.isr))
        self._advance(tp, state)
        return True

    def _stop_following(self, tp: TopicPartition) -> None:
        source = self._following.pop(tp, None)
        if source is not None and source in self.fetchers:
            self.fetchers[source].remove(tp)

    def on_log_dir_failure(self, failure: LogDirFailure) -> None:
        """A log dir went offline: its partitions are neither led nor followed here; acks=all
        produces waiting on them get KAFKA_STORAGE_ERROR (the controller moves the
        leaderships, lifecycle.py tells it)."""
        for tp in failure.partitions:
            self.session_news.moved(tp)
            self._stop_following(tp)
            if self.leaders.pop(tp, None) is not None:
                self._acks.fail(tp, errors.KafkaStorageError(
                    f"{tp[0]}-{tp[1]}: log dir {failure.log_dir} is offline"))

    def stop_replica(self, tp: TopicPartition) -> None:
        """This broker no longer hosts `tp` (its log is about to go): no fetching, no leading."""
        self._drop(tp)

    def _drop(self, tp: TopicPartition) -> None:
        self.session_news.moved(tp)
        self._stop_following(tp)
        if self.leaders.pop(tp, None) is not None:
            self._acks.fail(tp, errors.NotLeaderOrFollower(f"{tp[0]}-{tp[1]} moved"))

    # -- the leader's side -------------------------------------------------------------------

    def leader_log(self, topic: str, partition: int,
                   current_leader_epoch: int = -1) -> PartitionLog:
        """The log of a partition this node leads, or the Kafka error a client expects."""
        return self.leader_partition(topic, partition, current_leader_epoch)[1]

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1
                         ) -> tuple[PartitionInfo, PartitionLog]:
        """(metadata, log) of a partition this node leads, or the Kafka error a client expects."""
        part = self.metadata.image.partition(topic, partition)
        if part is None:
            raise errors.UnknownTopicOrPartition(
                f"this server does not host {topic}-{partition}")
        if part.leader != self.node_id:
            raise errors.NotLeaderOrFollower(
                f"node {self.node_id} is not the leader of {topic}-{partition}")
        if current_leader_epoch >= 0 and current_leader_epoch != part.leader_epoch:
            if current_leader_epoch > part.leader_epoch:
                raise errors.UnknownLeaderEpoch(
                    f"{topic}-{partition}: client epoch {current_leader_epoch} is newer than "
                    f"{part.leader_epoch}")
            raise errors.FencedLeaderEpoch(
                f"{topic}-{partition}: client epoch {current_leader_epoch} is older than "
                f"{part.leader_epoch}")
        plog = self.logs.get(topic, partition)
        if plog is None:
            offline = self.logs.offline_dir_of(topic, partition)
            if offline is not None:
                raise errors.KafkaStorageError(
                    f"{topic}-{partition}: its log dir {offline} is offline")
            raise errors.LeaderNotAvailable(f"log of {topic}-{partition} is not loaded")
        if (topic, partition) not in self.leaders:
            # The log exists but the role is not taken up yet (a log created in the
            # background, log_creator.py): an append now would be acknowledged with no
            # leader state to hold acks=all to the ISR or to answer followers.
            raise errors.LeaderNotAvailable(f"{topic}-{partition}: becoming leader")
        return part, plog

    def append_as_leader(self, topic: str, partition: int, data: bytearray,
                         headers: list[BatchHeader], acks: int = -1
                         ) -> tuple[AppendInfo, PartitionLog]:
        """Append validated batches to a partition this node leads (produce, coordinator).

        acks=-1 first checks min.insync.replicas against the ISR, as Kafka does before
        appending. Returns the log so the caller can flush it per the topic's policy.
        """
        part, plog = self.leader_partition(topic, partition)
        if acks == -1:
            self._require_min_insync(self.metadata.image, part, topic, partition)
        tp = (topic, partition)
        info = plog.append(data, headers, leader_epoch=part.leader_epoch, notify=False)
        # The high watermark moves as the in-sync replicas fetch (at once if we are the
        # ISR: then acks=all is answered on this path, produce.py). leader_partition found
        # the leader state. One notification of the log's move for the new end and the
        # high watermark together, and one wake of the fetches waiting on either.
        hw_moved = self._advance(tp, self.leaders[tp], plog, notify=False)
        if hw_moved or not info.duplicate:
            plog.on_moved()
            self._fetches.wake(tp)
        return info, plog

    def check_min_insync(self, topic: str, partition: int, after_append: bool = False) -> None:
        """acks=all needs |ISR| >= min.insync.replicas: checked before appending, and again
        once replicated (the ISR may have shrunk meanwhile)."""
        image = self.metadata.image
        part = image.partition(topic, partition)
        if part is None:
            raise errors.NotLeaderOrFollower(f"{topic}-{partition} is gone")
        self._require_min_insync(image, part, topic, partition, after_append)

    def _require_min_insync(self, image: MetadataImage, part: PartitionInfo, topic: str,
                            partition: int, after_append: bool = False) -> None:
        self._min_insync.require(image, self._config(), part, topic, partition, after_append)


    def on_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int) -> None:
        state = self.leaders.get(tp)
        plog = self.logs.get(*tp)
        if state is None or plog is None:
            return
        state.on_follower_fetch(replica_id, fetch_offset, plog.log_end_offset, now_ms())
        self._advance(tp, state)
        if replica_id not in state.isr:
            self._maybe_alter_isr(tp, state)

    def _advance(self, tp: TopicPartition, state: PartitionLeaderState,
                 plog: PartitionLog | None = None, notify: bool = True) -> bool:
        """Move the log's high watermark to the leader state's; True when it moved.
        ``notify=False``: the caller notifies the log's move and wakes the fetches."""
        if plog is None:
            plog = self.logs.get(*tp)
            if plog is None:
                return False
        if state.advance_high_watermark(plog.log_end_offset) or \
                plog.high_watermark != state.high_watermark:
            plog.set_high_watermark(state.high_watermark, notify=notify)
            self._acks.reached(tp, plog.high_watermark)
            if notify:
                self._fetches.wake(tp)
            return True
        return False

    async def wait_for_high_watermark(self, tp: TopicPartition, offset: int,
                                      timeout_s: float) -> None:
        """Return once the high watermark reaches `offset` (acks=all), or raise."""
        plog = self.logs.get(*tp)
        if plog is not None and plog.high_watermark >= offset:
            return
        if tp not in self.leaders:
            raise errors.NotLeaderOrFollower(f"{tp[0]}-{tp[1]}: no longer the leader")
        await self._acks.wait(tp, offset, timeout_s)

    def wake(self, tp: TopicPartition) -> None:
        """New data or a new high watermark on `tp`: wake the fetches waiting on it."""
        self._fetches.wake(tp)

    async def wait_for_append(self, tps: Iterable[Hashable], timeout: float) -> None:
        """Return when any of `tps` gets new data, or after `timeout` seconds (a fetch
        session as one of them: when it has news, session_news.py)."""
        await self._fetches.wait(tps, timeout)

    # -- ISR changes -------------------------------------------------------------------------

    async def _isr_loop(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        interval = max(0.1, min(lag_ms / 2000, 2.0))
        while True:
            await asyncio.sleep(interval)
            self.check_isr_due(now_ms())

    def check_isr_due(self, now: float) -> int:
        """The ISR check of every led partition whose next check came; how many were looked at."""
        due = self._isr_checks.pop_due(now)
        for tp in due:
            state = self.leaders.get(tp)
            if state is not None:   # else no longer led: it leaves the queue
                self._maybe_alter_isr(tp, state)
        return len(due)

    def _maybe_alter_isr(self, tp: TopicPartition, state: PartitionLeaderState) -> None:
        plog = self.logs.get(*tp)
        if plog is None:
            self._isr_checks.schedule(tp, 0)   # as before: looked at again every pass
            return
        # Every ISR check first applies the quiet partitions' implied fetches (session_news.py),
        # the one a follower's fetch makes as much as the periodic one: a caught-up member on
        # a quiet partition must not look stale in a proposal made for another replica.
        self.session_news.settle(tp)
        lag_ms = self.config["replica.lag.time.max.ms"]
        now = now_ms()
        proposed = state.isr_change(plog.log_end_offset, now, lag_ms,
                                    self.metadata.image.live_broker_ids)
        if proposed is not None:
            self._propose_isr(tp, state, proposed)
        # After the implied fetches, so a quiet partition in sync is next looked at a lag
        # window after its followers' last fetch, not at every pass.
        self._isr_checks.schedule(tp, state.next_isr_check_ms(now, lag_ms))

    def _propose_isr(self, tp: TopicPartition, state: PartitionLeaderState,
                     proposed: tuple[int, ...]) -> None:
        state.pending_isr = proposed
        log.debug("%s-%d: proposing ISR %s (was %s)", tp[0], tp[1], list(proposed),
                  list(state.isr))
        self.alter_partitions.submit(IsrChange(tp[0], tp[1], state.leader_epoch,
                                               state.partition_epoch, proposed))

    def _wants_isr_change(self, change: IsrChange) -> bool:
        """We still lead the partition and still want exactly `change`."""
        state = self.leaders.get(change.tp)
        return (state is not None and state.pending_isr == change.new_isr
                and (state.leader_epoch, state.partition_epoch)
                == (change.leader_epoch, change.partition_epoch))

    def _isr_change_refused(self, change: IsrChange, error: Exception) -> None:
        if not self._wants_isr_change(change):
            return
        log.info("%s-%d: ISR change %s refused: %s", change.topic, change.partition,
                 list(change.new_isr), error)
        if proves_not_committed(error):
            # The maximal ISR drops the joiner and the next check may propose again.
            self.leaders[change.tp].pending_isr = None
            self._isr_checks.schedule(change.tp, 0)
        # Otherwise the change may have committed on an earlier attempt: the maximal ISR
        # keeps counting the joiner (so the high watermark never passes it) until the
        # metadata brings the ISR or a new leadership, which clears the pending change.

    def leader_high_watermark(self, tp: TopicPartition) -> int | None:
        """As a follower of `tp`: the leader's high watermark when it last answered us."""
        source = self._following.get(tp)
        fetcher = None if source is None else self.fetchers.get(source)
        return None if fetcher is None else fetcher.leader_high_watermarks.get(tp)

    def leader_states(self) -> Iterable[tuple[TopicPartition, PartitionLeaderState]]:
        return self.leaders.items()

    def describe(self) -> dict[str, Any]:
        return {f"{t}-{p}": {"hw": s.high_watermark, "isr": s.isr}
                for (t, p), s in self.leaders.items()}
