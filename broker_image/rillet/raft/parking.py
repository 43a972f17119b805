"""When the leader may park a quorum Fetch that brings no records (pure logic).

A follower learns the high watermark only from Fetch answers. The Fetch that moves the
high watermark is usually the follower's own (its offset is what completes the majority), so
the answer carrying the new high watermark has no records: parked until something else
moved, that follower (and any other that fetched after the move) learnt of the commit one
whole fetch wait late (500 ms), and so applied new topics and ACLs late. Kafka's KRaft
leader answers a fetch at once when the high watermark moved and completes parked ones;
Fetch v12 carries no follower high watermark (KIP-1166 added one later), so the leader
remembers the high watermark it last told each replica, and parks only when it has nothing
the replica has not heard.

What it remembers may be wrong after the replica restarts (it knows less than it was told);
a fetch offset that went back, or a replica silent for longer than `forget_after_ms`, is
answered at once, so a restart costs at most one parked fetch.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Told:
    """The last answer one replica got: its epoch and high watermark, for which fetch offset, when."""
    epoch: int
    high_watermark: int
    fetch_offset: int
    at_ms: int


class FetchParking:
    """Per replica: the high watermark last answered. Owned by the RaftNode (its lock)."""

    def __init__(self, forget_after_ms: int) -> None:
        self._forget_after_ms = forget_after_ms
        self._told: dict[int, _Told] = {}

    def has_news(self, replica: int, epoch: int, fetch_offset: int, high_watermark: int,
                 now_ms: int) -> bool:
        """True when an answer with `high_watermark` tells `replica` something new."""
        told = self._told.get(replica)
        # What an earlier epoch's leader (this node too) told it says nothing now.
        if told is None or told.epoch != epoch or fetch_offset < told.fetch_offset \
                or now_ms - told.at_ms > self._forget_after_ms:
            return True
        return high_watermark > told.high_watermark

    def answered(self, replica: int, epoch: int, fetch_offset: int, high_watermark: int,
                 now_ms: int) -> None:
        """Record the answer sent to `replica`."""
        self._told[replica] = _Told(epoch, high_watermark, fetch_offset, now_ms)
