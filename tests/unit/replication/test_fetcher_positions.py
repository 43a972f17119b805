"""A follower fetcher keeps each partition's fetch position and reads it again only when its
log moved or the partition was added or removed: a round costs what changed, and the fetch
session it builds names exactly what a comparison of every partition would have named."""
from __future__ import annotations

import asyncio
from pathlib import Path

from rillet.quotas.rate import RateQuota
from rillet.replication.fetch_session_handler import FetchSessionHandler
from rillet.replication.fetch_sessions import PartitionFetch
from rillet.replication.fetcher import FollowerSide, ReplicaFetcher
from rillet.replication.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, SideThrottle
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager

from ..storage.helpers import append, make_batch

A, B, C = ("t", 0), ("t", 1), ("t", 2)
MAX_BYTES = 1 << 20


class Follower:
    def __init__(self, tmp_path: Path) -> None:
        self.logs = LogManager([tmp_path])
        self.logs.load_logs(lambda t, p: LogConfig())
        self.config = {"replica.fetch.max.bytes": MAX_BYTES}
        self.throttle = SideThrottle(FOLLOWER_REPLICAS, FOLLOWER_RATE, 1, clock=lambda: 0.0)
        side = FollowerSide(1, lambda: self.config, self.logs, self.throttle,  # type: ignore
                            lambda tp: None, None)
        self.fetcher = ReplicaFetcher(side, 0, "127.0.0.1", 1)
        self.logs.on_moved(self.fetcher.moved)   # as the ReplicaManager passes it on
        for tp in (A, B, C):
            self.logs.create(*tp, LogConfig())
            self.fetcher.add(tp, 3)
        self.handler = FetchSessionHandler()
        self.round()   # the full fetch opening the session
        self.handler.handle_response(self.sent, 0, session_id=9)

    def round(self) -> set[tuple[str, int]] | None:
        wanted, changed = self.fetcher._wanted()
        self.sent = self.handler.build(wanted, changed)
        return changed

    def answered(self) -> None:
        assert self.handler.handle_response(self.sent, 0, session_id=9)

    def close(self) -> None:
        asyncio.run(self.logs.close())


def _at(offset: int, epoch: int = 3, last_epoch: int = -1) -> PartitionFetch:
    return PartitionFetch(offset, epoch, last_epoch, 0, MAX_BYTES)


def test_an_idle_round_reads_no_position_and_names_nothing(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    assert f.sent.full and f.sent.partitions == {A: _at(0), B: _at(0), C: _at(0)}
    assert f.round() == set()
    assert (f.sent.partitions, f.sent.forgotten) == ({}, ())
    f.close()


def test_a_moved_log_is_read_again_and_named(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    append(f.logs.get(*B), make_batch(4), epoch=2)
    assert f.round() == {B}
    assert f.sent.partitions == {B: _at(4, last_epoch=2)}
    # Refused as a whole (not a session error): the same change is sent again.
    assert not f.handler.handle_response(f.sent, 7, session_id=9)
    assert f.round() == set() and f.sent.partitions == {B: _at(4, last_epoch=2)}
    f.answered()
    assert f.round() == set() and f.sent.partitions == {}
    f.close()


def test_added_removed_and_new_epoch_partitions(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    f.fetcher.remove(A)
    f.fetcher.add(C, 4)
    f.round()
    assert (f.sent.partitions, f.sent.forgotten) == ({C: _at(0, epoch=4)}, (A,))
    f.answered()
    f.config = {"replica.fetch.max.bytes": 512}   # a dynamic config: every one again
    f.round()
    assert f.sent.partitions == {tp: PartitionFetch(0, e, -1, 0, 512)
                                 for tp, e in ((B, 3), (C, 4))}
    f.close()


def test_a_follower_throttle_compares_every_partition_until_lifted(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    f.throttle.update_topics({"t": {FOLLOWER_REPLICAS: "1:1"}})   # B throttled here
    f.throttle.quota = RateQuota(10, 11, 1.0)
    f.throttle.quota.record(1000, 0.0)   # over its rate: B is held back
    assert f.round() is None
    assert f.sent.forgotten == (B,)
    f.answered()
    f.throttle.quota = RateQuota()   # lifted
    assert f.round() is None         # compared once more: B comes back
    assert f.sent.partitions == {B: _at(0)}
    f.answered()
    assert f.round() == set() and f.sent.partitions == {}
    f.close()
