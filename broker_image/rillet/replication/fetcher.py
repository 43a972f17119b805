"""A follower's fetcher: one task per source broker, pulling every partition it leads for us.

Each round sends one Fetch (v12, replica_id = this broker) with, per partition, our
log end offset, the epoch of our last batch and the leader epoch we know. The
leader answers records, its high watermark, or the epoch where our log diverges
from its own: we truncate to that epoch's end (Kafka's leader-epoch truncation,
KIP-101/279) before appending, so replicas converge to the leader's log byte for byte.
Batches are appended as the leader wrote them (offsets, epochs, producer ids), which
also rebuilds idempotent producer state here. A throttled partition is left out of a
round while this broker's follower replication quota is exceeded
(replication/throttle.py), so it never holds back the others. Fetches go through a fetch
session (KIP-227, replication/fetch_session_handler.py): after the first, full, one a Fetch
names only the partitions whose position changed, and the leader answers only those with
something new, so an idle round costs nothing per partition on the wire. Nor on this side:
each partition's fetch position is kept, and read again from its log only when the log
moved (told by the ReplicaManager, from the log's own notification) or the partition was
added, so a round costs what changed, not every partition followed; only while this
broker's follower throttle has a rate is every partition checked each round.

Owned by the ReplicaManager; event loop only.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..client.connection import BrokerConnection, KafkaClientError
from ..defs.broker_config import BrokerConfig
from ..protocol import errors
from ..raft.divergence import truncation_offset
from ..records import parse_batches
from ..storage.manager import LogManager
from ..tasks import cancel_and_wait
from .fetch_session_handler import FetchSessionHandler, SessionRequest
from .fetch_sessions import PartitionFetch
from .throttle import SideThrottle

log = logging.getLogger(__name__)
FETCH, FETCH_VERSION = 1, 12
BACKOFF_S = 0.1
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class FollowerSide:
    """What every fetcher of one broker shares, handed over by the ReplicaManager."""
    node_id: int
    config: Callable[[], BrokerConfig]   # the current one: dynamic configs replace it
    logs: LogManager
    throttle: SideThrottle               # this broker's follower throttle
    appended: Callable[[TopicPartition], None]   # wakes the fetches waiting on a partition
    ssl_context: ssl.SSLContext | None   # towards the brokers' inter-broker listener


class ReplicaFetcher:
    def __init__(self, side: FollowerSide, source_id: int, host: str, port: int) -> None:
        self.side = side
        self.source_id = source_id
        self.address = (host, port)
        self.partitions: dict[TopicPartition, int] = {}   # tp -> leader epoch
        self._fetches: dict[TopicPartition, PartitionFetch] = {}   # what each one asks now
        self._stale: set[TopicPartition] = set()   # to read again from its log next round
        self._max_bytes: int | None = None   # replica.fetch.max.bytes in self._fetches
        self._compare_all = False   # the last round held some back: compare every one
        self._caught_up: set[TopicPartition] = set()   # reached the leader's HW last time
        # tp -> the leader's high watermark in its last answer (DescribeLogDirs' lag)
        self.leader_high_watermarks: dict[TopicPartition, int] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None
        self._session = FetchSessionHandler()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        if self._conn is not None:
            await self._conn.close()

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = leader_epoch
        self._stale.add(tp)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._stale.add(tp)   # forgotten next round
        self._caught_up.discard(tp)
        self.leader_high_watermarks.pop(tp, None)

    def moved(self, tp: TopicPartition) -> None:
        """The log of `tp` moved (end, log start, epoch): its fetch position is read again."""
        if tp in self.partitions:
            self._stale.add(tp)

    def set_address(self, host: str, port: int) -> None:
        if (host, port) != self.address:
            self.address = (host, port)
            self._conn = None
            self._session.reset(close=False)   # another process: it never knew the session

    def _connection(self) -> BrokerConnection:
        if self._conn is None:
            config = self.side.config()
            timeout = (config["replica.fetch.wait.max.ms"] +
                       config["controller.quorum.request.timeout.ms"]) / 1000
            self._conn = BrokerConnection(*self.address, client_id=f"replica-{self.side.node_id}",
                                          timeout=timeout,
                                          ssl_context=self.side.ssl_context)
        return self._conn

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except (KafkaClientError, OSError, asyncio.TimeoutError) as exc:
                log.debug("fetch from broker %d failed: %s", self.source_id, exc)
                # The answer may be lost: what the leader's session holds is unknown.
                self._session.reset()
                conn, self._conn = self._conn, None
                if conn is not None:
                    await conn.close()
                await asyncio.sleep(BACKOFF_S)
            except Exception:
                log.exception("fetch from broker %d failed", self.source_id)
                await asyncio.sleep(BACKOFF_S)

    def _refresh(self) -> set[TopicPartition]:
        """Read the fetch position of every stale partition from its log; those read."""
        max_bytes = self.side.config()["replica.fetch.max.bytes"]
        if max_bytes != self._max_bytes:   # a dynamic config changed it: every one
            self._max_bytes = max_bytes
            self._stale.update(self.partitions)
        stale, self._stale = self._stale, set()
        for tp in stale:
            epoch = self.partitions.get(tp)
            plog = None if epoch is None else self.side.logs.get(*tp)
            if plog is None:
                self._fetches.pop(tp, None)
                continue
            self._fetches[tp] = PartitionFetch(plog.log_end_offset, epoch, plog.latest_epoch,
                                               plog.log_start_offset, max_bytes)
        return stale

    def _wanted(self) -> tuple[Mapping[TopicPartition, PartitionFetch],
                               set[TopicPartition] | None]:
        """What this round asks of each partition not held back by the throttle, and which
        of those may differ from the last round (None: any may)."""
        changed = self._refresh()
        throttle = self.side.throttle
        if throttle.quota.unlimited and not self._compare_all:
            return self._fetches, changed
        # The held-back ones leave the session and come back: compare every partition,
        # this round and the one after the throttle is lifted.
        self._compare_all = not throttle.quota.unlimited
        return {tp: f for tp, f in self._fetches.items()
                if not throttle.holds_back(tp, tp in self._caught_up)}, None

    async def _round(self) -> None:
        config = self.side.config()
        wanted, changed = self._wanted()
        if not wanted:
            await asyncio.sleep(BACKOFF_S)
            return
        sent = self._session.build(wanted, changed)
        response = await self._connection().request(FETCH, FETCH_VERSION, {
            "replica_id": self.side.node_id, "max_wait": config["replica.fetch.wait.max.ms"],
            "min_bytes": config["replica.fetch.min.bytes"],
            "max_bytes": config["replica.fetch.max.bytes"],
            "isolation_level": 0, "session_id": sent.session_id, "session_epoch": sent.epoch,
            "forgotten_topics_data": _forgotten(sent), "rack_id": config["broker.rack"] or "",
            "topics": _topics(sent)})
        if not self._session.handle_response(sent, int(response.error_code),
                                             int(response.session_id)):
            log.debug("fetch from broker %d refused as a whole (error %d)",
                      self.source_id, response.error_code)
            await asyncio.sleep(BACKOFF_S)   # a session error reopens it with the next one
            return
        backoff = False
        for topic in response.responses:
            for part in topic.partitions:
                tp = (topic.topic, part.partition_index)
                asked = self._fetches.get(tp)
                if asked is None or self.partitions.get(tp) != asked.current_leader_epoch:
                    continue   # reassigned while the fetch was out
                backoff |= not await self._apply(tp, part)
        if backoff:
            await asyncio.sleep(BACKOFF_S)

    async def _apply(self, tp: TopicPartition, part: Any) -> bool:
        """Apply one partition's answer; False when it calls for a pause."""
        plog = self.side.logs.get(*tp)
        if plog is None:
            return False
        code = int(part.error_code)
        if code == errors.OffsetOutOfRange.code and plog.log_end_offset < part.log_start_offset:
            # The leader deleted what we lack (retention): start again at its log start.
            plog.truncate_fully_and_start_at(part.log_start_offset)
            return True
        if code != 0:
            return False   # not the leader (any more): the metadata will tell us who is
        diverging = part.diverging_epoch
        if diverging.end_offset >= 0:
            self._truncate(tp, plog, diverging.epoch, diverging.end_offset)
            return True
        records = part.records
        if records:
            data = bytearray(records)
            headers = parse_batches(data, strict=False)
            if headers and headers[0].base_offset >= plog.log_end_offset:
                plog.append_replicated(data, headers)
            self.side.throttle.record(tp, len(data))
        if plog.log_end_offset >= part.high_watermark:
            self._caught_up.add(tp)
        else:
            self._caught_up.discard(tp)
        self.leader_high_watermarks[tp] = int(part.high_watermark)
        plog.high_watermark = min(part.high_watermark, plog.log_end_offset)
        # DeleteRecords on the leader: the same log start here (never past our HW).
        if part.log_start_offset > plog.log_start_offset:
            plog.advance_log_start(part.log_start_offset)
        if plog.flush_pending():
            await plog.maybe_flush()
        self.side.appended(tp)
        return True

    def _truncate(self, tp: TopicPartition, plog: Any, epoch: int, end_offset: int) -> None:
        offset = truncation_offset((epoch, end_offset), plog.end_offset_for_epoch(epoch),
                                   plog.log_start_offset, plog.log_end_offset)
        if offset < plog.log_end_offset:
            log.info("%s-%d: truncating from %d to %d (diverged from the leader at epoch %d)",
                     tp[0], tp[1], plog.log_end_offset, offset, epoch)
            plog.truncate_to(offset)


def _topics(sent: SessionRequest) -> list[dict[str, Any]]:
    """The Fetch's topics: the partitions `sent` names, grouped by topic."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), f in sent.partitions.items():
        topics.setdefault(topic, []).append({
            "partition": p, "current_leader_epoch": f.current_leader_epoch,
            "fetch_offset": f.fetch_offset, "last_fetched_epoch": f.last_fetched_epoch,
            "log_start_offset": f.log_start_offset,
            "partition_max_bytes": f.partition_max_bytes})
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]


def _forgotten(sent: SessionRequest) -> list[dict[str, Any]]:
    topics: dict[str, list[int]] = {}
    for topic, p in sent.forgotten:
        topics.setdefault(topic, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]
