"""A follower fetcher's fetch session, its side (KIP-227, Kafka's FetchSessionHandler).

The first Fetch to a leader is full (every partition, session id 0, epoch 0) and the
leader answers the id of the session it opened. Each later Fetch carries that id and the
next epoch and names only what changed since the last answered one: partitions added or
whose position or epochs moved, and those no longer wanted (forgotten). What was sent
counts only once it is answered without a session error; a connection failure or a
FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH answer starts over with a full
fetch (closing the old session, if the leader still knows it). A leader that declines
sessions (answers id 0) gets full fetches every time.

The fetcher says which partitions changed since its last build (`changed`), so building an
incremental fetch compares only those with what the leader holds, not every partition;
without it (`None`) every one is compared.

Owned by one ReplicaFetcher; pure logic.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..protocol import errors
from .fetch_sessions import INITIAL_EPOCH, NO_SESSION, PartitionFetch, next_epoch

TopicPartition = tuple[str, int]
_SESSION_ERRORS = (errors.FetchSessionIdNotFound.code, errors.InvalidFetchSessionEpoch.code)


@dataclass(frozen=True)
class SessionRequest:
    """One Fetch of the session: what it names and the state it assumes."""
    session_id: int
    epoch: int
    partitions: dict[TopicPartition, PartitionFetch]   # to send
    forgotten: tuple[TopicPartition, ...]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH   # of the next fetch; INITIAL_EPOCH: a full one
        self._sent: dict[TopicPartition, PartitionFetch] = {}   # what the leader holds
        # Changed since the leader last took in a fetch of this session: compared again
        # until one is answered (a fetch refused as a whole is sent again).
        self._pending: set[TopicPartition] = set()

    def build(self, wanted: Mapping[TopicPartition, PartitionFetch],
              changed: Iterable[TopicPartition] | None = None) -> SessionRequest:
        """The next Fetch for `wanted`, every partition the fetcher wants this round;
        `changed`: the partitions whose entry in `wanted` may differ from the last build's
        (None: any may)."""
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, dict(wanted), ())
        if changed is None:
            candidates: Iterable[TopicPartition] = {*wanted, *self._sent}
        else:
            self._pending.update(changed)
            candidates = self._pending
        partitions = {tp: f for tp in candidates
                      if (f := wanted.get(tp)) is not None and self._sent.get(tp) != f}
        forgotten = tuple(tp for tp in candidates if tp not in wanted and tp in self._sent)
        return SessionRequest(self.session_id, self.epoch, partitions, forgotten)

    def handle_response(self, sent: SessionRequest, error_code: int, session_id: int) -> bool:
        """Take in the answer to `sent`; False when it was refused as a whole (a session
        error: the next fetch reopens the session; any other: it is sent again)."""
        if error_code in _SESSION_ERRORS:
            # Not found: nothing to close. Wrong epoch: close it while opening the next.
            self.reset(close=error_code == errors.InvalidFetchSessionEpoch.code)
            return False
        if error_code != 0:
            return False
        if session_id == NO_SESSION:
            self.reset(close=False)   # declined: full fetches from now on
            return True
        self.session_id = session_id
        self.epoch = next_epoch(sent.epoch)
        if sent.full:
            self._sent = dict(sent.partitions)
        else:
            self._sent.update(sent.partitions)
            for tp in sent.forgotten:
                self._sent.pop(tp, None)
        self._pending.clear()
        return True

    def reset(self, close: bool = True) -> None:
        """Start over with a full fetch; `close`: it names the old session so the leader
        frees it at once rather than when it is evicted."""
        if not close:
            self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending.clear()
