"""Fetch sessions of follower fetches, the leader's side (KIP-227, Kafka's FetchSessionCache).

A follower opens a session with a full Fetch (session id 0, epoch 0) naming every partition
it follows from us; the leader remembers each partition's fetch position and what it last
answered (high watermark, log start). Every later Fetch of that session (its id, the next
epoch) names only the partitions whose position changed and those it forgets; the leader
answers only the partitions with something new (records, high watermark, log start, an
error). With thousands of partitions an idle round trip is then a few bytes each way
instead of every partition encoded, decoded and read twice.

Epochs: epoch -1 fetches without a session (closing the named one); epoch 0 opens a new
session (closing the named one); any other epoch must be the session's next one or the
fetch is refused with INVALID_FETCH_SESSION_EPOCH; an unknown id (evicted, another
replica's, a restarted leader) gets FETCH_SESSION_ID_NOT_FOUND. Either way the follower
opens a new session with a full fetch (replication/fetch_session_handler.py).

An incremental fetch costs what it names and what changed, not the session's size: each
session keeps the partitions that may have news for it (`news`, an ordered set), marked when
a partition's log or role moves (replication/session_news.py) and cleared once answered with
nothing more to tell; the cache knows which sessions hold each partition.

Only follower fetches get sessions: consumers are still answered session id 0 (declined),
which every client handles with full fetches. At most MAX_SESSIONS are kept, the least
recently used evicted first (Kafka's max.incremental.fetch.session.cache.slots default).

Owned by the ReplicaManager; event loop only. Pure logic, no clock.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..protocol import errors

TopicPartition = tuple[str, int]
NO_SESSION = 0
INITIAL_EPOCH = 0   # a full fetch opening a session
FINAL_EPOCH = -1    # a full fetch without a session
MAX_SESSIONS = 1000
_MAX_INT32 = (1 << 31) - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: it wraps to 1, never to 0 or -1 (which mean open / none)."""
    return 1 if epoch >= _MAX_INT32 else epoch + 1


@dataclass(frozen=True)
class PartitionFetch:
    """What a follower's Fetch says of one partition: where to read from and its epochs."""
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int = 0


@dataclass
class CachedPartition:
    fetch: PartitionFetch
    high_watermark: int | None = None    # last answered; None: never answered
    log_start_offset: int | None = None
    leader_end: int | None = None   # our log end when last looked at; None: not yet


@dataclass(eq=False)   # compared and hashed by identity: it is also a wake-up key
class FetchSession:
    id: int
    replica_id: int
    epoch: int   # the one its next fetch must carry
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    # The partitions that may have something to answer, oldest first (values unused): every
    # other one had nothing new when last looked at, at `looked_ms`, and has not moved since.
    news: dict[TopicPartition, None] = field(default_factory=dict)
    looked_ms: float = 0.0   # when a fetch of this session last looked at its partitions

    def update(self, requested: dict[TopicPartition, PartitionFetch],
               forgotten: Iterable[TopicPartition]) -> None:
        for tp in forgotten:
            self.partitions.pop(tp, None)
            self.news.pop(tp, None)
        for tp, fetch in requested.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(fetch)
            else:
                cached.fetch = fetch
            # Named: looked at by this fetch, and quiet again only once its answer says so.
            self.news[tp] = None

    def mark(self, tp: TopicPartition) -> bool:
        """`tp` moved: it may have news. True when it had none (it was quiet until now)."""
        if tp in self.news or tp not in self.partitions:
            return False
        self.news[tp] = None
        return True

    def looked_at(self, tp: TopicPartition, has_news: bool, leader_end: int | None) -> None:
        """What a fetch found of `tp` (our log end then): news to answer (again), or none."""
        cached = self.partitions.get(tp)
        if cached is None:
            return
        cached.leader_end = leader_end
        if has_news:
            self.news[tp] = None
        else:
            self.news.pop(tp, None)

    def answered(self, tp: TopicPartition, high_watermark: int, log_start_offset: int) -> None:
        """Record what the response says of `tp`, so an unchanged partition is left out."""
        cached = self.partitions.get(tp)
        if cached is not None:
            cached.high_watermark = high_watermark
            cached.log_start_offset = log_start_offset


def needs_answer(cached: CachedPartition, log_end: int, high_watermark: int,
                 log_start: int) -> bool:
    """Whether a partition the follower did not name must be in an incremental answer:
    records past its position, or a high watermark or log start it has not been told."""
    return (log_end > cached.fetch.fetch_offset or high_watermark != cached.high_watermark
            or log_start != cached.log_start_offset)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS,
                 new_id: Callable[[], int] = lambda: random.randint(1, _MAX_INT32)) -> None:
        self._max = max_sessions
        self._new_id = new_id
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()   # LRU first
        self._holders: dict[TopicPartition, dict[int, FetchSession]] = {}   # by session id
        # Follower fetches resolved, the partitions they named, the sessions opened
        # (metrics.py): how much each fetch carries, which sessions exist to shrink.
        self.requests = 0
        self.partitions_named = 0
        self.opened = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def holding(self, tp: TopicPartition) -> Iterable[FetchSession]:
        """The sessions that hold `tp` (one per follower fetching it through a session)."""
        holders = self._holders.get(tp)
        return () if holders is None else holders.values()

    def resolve(self, replica_id: int, session_id: int, epoch: int,
                requested: dict[TopicPartition, PartitionFetch],
                forgotten: Iterable[TopicPartition]) -> tuple[FetchSession | None, bool]:
        """(session, full) for a follower's Fetch: session None for a sessionless fetch;
        full when the request names every partition it wants (a session opened, or none).
        Raises FetchSessionIdNotFound or InvalidFetchSessionEpoch."""
        self.requests += 1
        self.partitions_named += len(requested)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._close(session_id)
            if epoch == FINAL_EPOCH:
                return None, True
            return self._open(replica_id, requested), True
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            raise errors.FetchSessionIdNotFound(
                f"no fetch session {session_id} of replica {replica_id}")
        if epoch != session.epoch:
            raise errors.InvalidFetchSessionEpoch(
                f"fetch session {session_id}: epoch {epoch}, expected {session.epoch}")
        forgotten = list(forgotten)
        for tp in forgotten:
            holders = self._holders.get(tp)
            if holders is not None:
                holders.pop(session.id, None)
                if not holders:
                    del self._holders[tp]
        session.update(requested, forgotten)
        self._hold(session, requested)
        session.epoch = next_epoch(epoch)
        self._sessions.move_to_end(session_id)
        return session, False

    def _hold(self, session: FetchSession, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._holders.setdefault(tp, {})[session.id] = session

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        for tp in session.partitions:
            holders = self._holders.get(tp)
            if holders is not None:
                holders.pop(session_id, None)
                if not holders:
                    del self._holders[tp]

    def _open(self, replica_id: int, requested: dict[TopicPartition, PartitionFetch]
              ) -> FetchSession:
        session_id = self._new_id()
        while session_id in self._sessions or session_id == NO_SESSION:
            session_id = self._new_id()
        # A follower runs one fetcher per leader (num.replica.fetchers has no effect), so a
        # new session of a replica replaces any other it had: a restarted follower opens
        # with id 0 and its old session, holding every partition it followed, is dropped
        # now rather than when the cache is full.
        for stale in [i for i, s in self._sessions.items() if s.replica_id == replica_id]:
            self._close(stale)
        while len(self._sessions) >= self._max:
            self._close(next(iter(self._sessions)))
        session = FetchSession(session_id, replica_id, next_epoch(INITIAL_EPOCH))
        self.opened += 1
        session.update(requested, ())
        self._sessions[session_id] = session
        self._hold(session, requested)
        return session
