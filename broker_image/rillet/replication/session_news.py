"""Which partitions of the followers' fetch sessions have news: the leader's side of an
incremental fetch (KIP-227), at a cost of what it names and what changed.

A partition a follower did not name must still be answered when there is something new for
it: records past its position, a high watermark or log start it was not told, or an error
(no longer led here). Kafka's leader reads every partition of the session on each fetch to
find them; here every move of a partition's log (end, high watermark, log start: the log's
own notification, through the LogManager) and every role change of a partition marks it in
the sessions holding it, so a fetch looks only at what it names and what was marked.

Unnamed partitions still count as fetches for the ISR, as in Kafka: the follower is where it
said last time. A partition with nothing new has our log end at the follower's position,
so such a fetch makes it caught up at the fetch's time. That implied fetch is not replayed
on every fetch of every quiet partition; it is applied when it matters: before the partition
moves (the first mark after a quiet spell, while the leader's state is still the one the
fetch saw) and before each ISR check (`settle`). It is the same call, with the same
offsets and the same time, that the fetch would have made.

Owned by the ReplicaManager; event loop only. No I/O.
"""
from __future__ import annotations

from typing import Callable, Hashable, Mapping

from ..storage.manager import LogManager
from .fetch_sessions import FetchSession, FetchSessionCache, PartitionFetch, needs_answer
from .leader import PartitionLeaderState

TopicPartition = tuple[str, int]


class SessionNews:
    def __init__(self, sessions: FetchSessionCache, logs: LogManager,
                 leaders: Mapping[TopicPartition, PartitionLeaderState],
                 fetched: Callable[[TopicPartition, int, int], None],
                 wake: Callable[[Hashable], None], now_ms: Callable[[], float]) -> None:
        """`fetched(tp, replica, offset)`: a follower fetch of `tp` from `offset` (high
        watermark, ISR); `wake(session)`: wakes the fetch of that session waiting."""
        self._sessions = sessions
        self._logs = logs
        self._leaders = leaders
        self._fetched = fetched
        self._wake = wake
        self._now_ms = now_ms

    def moved(self, tp: TopicPartition) -> None:
        """`tp`'s log moved, or its role here is about to change (call it before the
        leader state changes): the sessions holding it may have news, wake their fetches."""
        for session in self._sessions.holding(tp):
            if session.mark(tp):
                self._implied_fetch(tp, session)
            self._wake(session)

    def settle(self, tp: TopicPartition) -> None:
        """Before an ISR check of `tp`: the implied fetches of the sessions where it is quiet."""
        for session in self._sessions.holding(tp):
            if tp not in session.news:
                self._implied_fetch(tp, session)

    def _implied_fetch(self, tp: TopicPartition, session: FetchSession) -> None:
        state = self._leaders.get(tp)
        cached = session.partitions.get(tp)
        if state is None or cached is None or cached.leader_end is None:
            return
        state.on_follower_fetch(session.replica_id, cached.fetch.fetch_offset,
                                cached.leader_end, session.looked_ms)

    def unnamed(self, session: FetchSession, named: Mapping[TopicPartition, PartitionFetch]
                ) -> dict[TopicPartition, PartitionFetch]:
        """The partitions an incremental fetch of `session` did not name that it answers:
        every marked one. The read checks each as it checks a named one (leader epoch,
        replica, offsets in the log) and only then counts it as a fetch: counted here,
        before those checks, a follower could be taken as caught up at an offset of a log
        that is no longer the one it fetched (a topic deleted and made again, a log cut
        short by an unclean election), and acks=all would count a replica without the
        records. A marked partition with nothing new costs an empty entry, once."""
        session.looked_ms = self._now_ms()
        return {tp: session.partitions[tp].fetch for tp in session.news if tp not in named}

    def opened(self, session: FetchSession) -> None:
        """A full fetch of `session` looks at every partition it names."""
        session.looked_ms = self._now_ms()

    def answered(self, session: FetchSession, tp: TopicPartition, high_watermark: int,
                 log_start_offset: int) -> None:
        """The response tells the follower this of `tp`: does anything remain to answer?
        (records past what fitted in the response, an error that stays)."""
        session.answered(tp, high_watermark, log_start_offset)
        cached = session.partitions.get(tp)
        if cached is None:
            return
        plog = self._logs.get(*tp)
        if plog is None or tp not in self._leaders:
            session.looked_at(tp, True, None)
            return
        session.looked_at(tp, needs_answer(cached, plog.log_end_offset, plog.high_watermark,
                                           plog.log_start_offset), plog.log_end_offset)
