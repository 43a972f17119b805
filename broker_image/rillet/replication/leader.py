"""A partition leader's view of its followers: pure logic, no I/O and no clock of its own.

What Kafka's Partition keeps as leader: every follower's log end offset (the offset
it last fetched from, so everything before it is on that follower) and when it was
last caught up. From these come

- the high watermark: the smallest log end offset over the in-sync replicas, never
  moving back, and never counting a replica outside the ISR;
- ISR shrink: in-sync followers not caught up for replica.lag.time.max.ms;
- ISR expand: out-of-sync replicas that reached the high watermark and the start of
  the leader's epoch (so they hold everything this leader may have committed);
- when the next ISR check is needed (`next_isr_check_ms`): with every replica in sync and
  no change in flight, not before the oldest last-caught-up time plus the lag window.

The ISR used for the high watermark is the committed one plus any pending addition
(Kafka's "maximal ISR"): a shrink counts only once committed, an addition at once, so
the high watermark never passes a replica that might be in the ISR.

Owned by the ReplicaManager (event loop only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import AbstractSet


@dataclass
class FollowerProgress:
    log_end_offset: int = -1          # unknown until its first fetch in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_end: int = -1   # our log end when it last fetched


@dataclass
class PartitionLeaderState:
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]                 # as committed in the metadata
    epoch_start_offset: int              # our log end when we became leader
    high_watermark: int
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None   # an AlterPartition in flight

    @classmethod
    def become_leader(cls, leader_id: int, leader_epoch: int, partition_epoch: int,
                      replicas: tuple[int, ...], isr: tuple[int, ...], log_end: int,
                      high_watermark: int, now_ms: float) -> "PartitionLeaderState":
        # A new leader gives every follower a full lag window before judging it.
        followers = {r: FollowerProgress(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
                     for r in replicas if r != leader_id}
        return cls(leader_id, leader_epoch, partition_epoch, tuple(replicas), tuple(isr),
                   log_end, high_watermark, followers)

    def update_metadata(self, partition_epoch: int, replicas: tuple[int, ...],
                        isr: tuple[int, ...], now_ms: float) -> None:
        """The controller committed a change (same leader and epoch): ISR or replicas."""
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        left = set(self.isr) - set(isr)
        self.isr = tuple(isr)
        self.pending_isr = None
        # A replica out of the ISR must earn its way back with fetches made from now on:
        # what it fetched before may be a process that died since (the controller takes a
        # re-registered broker out, and its empty log must not look caught up: KIP-903).
        for r in left & set(self.followers):
            self.followers[r] = FollowerProgress()
        for r in replicas:
            if r != self.leader_id and r not in self.followers:
                self.followers[r] = FollowerProgress(last_caught_up_ms=now_ms,
                                                     last_fetch_ms=now_ms)
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, leader_end: int,
                          now_ms: float) -> None:
        """A follower fetched from `fetch_offset`: it holds everything before it."""
        progress = self.followers.get(replica_id)
        if progress is None:
            return
        progress.log_end_offset = fetch_offset
        # Kafka's rule: caught up now if it reached our end, or at the time of its last
        # fetch if it reached what our end was then (a busy leader's end keeps moving).
        if fetch_offset >= leader_end:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_end = leader_end
        progress.last_fetch_ms = now_ms

    def advance_high_watermark(self, leader_end: int) -> bool:
        """Recompute the high watermark; True if it moved."""
        ends = [leader_end]
        for r in self.maximal_isr:
            if r == self.leader_id:
                continue
            progress = self.followers.get(r)
            ends.append(progress.log_end_offset if progress is not None else -1)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def isr_change(self, leader_end: int, now_ms: float, lag_ms: float,
                   live: AbstractSet[int]) -> tuple[int, ...] | None:
        """The ISR to propose, or None: laggards out, caught-up replicas in. Only `live`
        (unfenced) brokers join: a broker that stopped right after fetching looks caught
        up for a whole lag window, and the controller refuses a fenced one, so proposing it
        would keep every other joiner out too (Kafka's KIP-841 rule)."""
        if self.pending_isr is not None:
            return None
        keep = [r for r in self.isr
                if r == self.leader_id or (
                    r in self.followers
                    and now_ms - self.followers[r].last_caught_up_ms <= lag_ms)]
        join = [r for r, p in self.followers.items()
                if r not in self.isr and r in live and p.log_end_offset >= self.high_watermark
                and p.log_end_offset >= self.epoch_start_offset
                and now_ms - p.last_caught_up_ms <= lag_ms]
        proposed = tuple(keep + sorted(join))
        if self.leader_id not in proposed:
            proposed = (self.leader_id,) + proposed
        return None if set(proposed) == set(self.isr) else proposed

    def next_isr_check_ms(self, now_ms: float, lag_ms: float) -> float:
        """The earliest time `isr_change` could propose anything, as far as this state tells:
        `now_ms` while a replica is out of the ISR (it may join any time it is caught up and
        live) or a change is in flight; math.inf with no followers.

        With the ISR the whole replica set, only a shrink can come, and none before the
        oldest last-caught-up time plus `lag_ms`: follower fetches only move those times
        later, so a check at that time is never too late (it finds the newer times and
        schedules the next one). The metadata changes this does not see (replicas, ISR,
        a refused change) must schedule a check themselves."""
        if (self.pending_isr is not None or set(self.isr) != set(self.replicas)
                or self.leader_id not in self.isr):
            return now_ms
        others = [r for r in self.replicas if r != self.leader_id]
        if any(r not in self.followers for r in others):
            return now_ms
        if not others:
            return math.inf
        return min(self.followers[r].last_caught_up_ms for r in others) + lag_ms
