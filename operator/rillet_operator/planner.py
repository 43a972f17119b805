"""Where partition replicas should live: pure planning for scaling, rebalancing and
replication-factor changes. No I/O; deterministic (same input, same plan).

An assignment maps (topic, partition) to its replica broker ids, the first being the preferred
leader. A "move" is a broker added to a partition's replica set (data copied); reordering
replicas moves no data.

plan_rebalance, in order:
1. replicas on brokers that are not targets are replaced (forced moves), onto a broker of a
   rack the partition lacks, then the least loaded;
2. partitions whose replicas span fewer racks than min(RF, racks among targets) get a replica
   moved to a missing rack;
3. replica counts are levelled: while the most and least loaded brokers differ by more than
   one, one replica moves from the most to the least loaded (the smallest partition first)
   where the rack spread allows. Each such move takes a replica from a broker above its final
   share to one below, so without rack constraints the number of moves is the known minimum:
   the forced moves plus the replicas above the final shares (the largest loads keep the
   ceiling shares). With racks, a move that would narrow a partition's rack spread is skipped,
   so balance within one holds only where the racks allow it;
4. preferred leaders are levelled the same way, by reordering replicas only.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

Key = tuple[str, int]
Assignment = dict[Key, tuple[int, ...]]


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


class _Layout:
    """A working copy of an assignment with per-broker replica loads and rack lookup."""

    def __init__(self, assignment: Mapping[Key, Sequence[int]], brokers: Sequence[Broker]):
        self.parts: dict[Key, list[int]] = {k: list(v) for k, v in sorted(assignment.items())}
        self.original = {k: frozenset(v) for k, v in self.parts.items()}
        self.targets = sorted(b.id for b in brokers)
        self.rack = {b.id: b.rack for b in brokers}
        self.racks = set(self.rack.values())
        # All racks None means no rack constraint at all.
        self.rack_aware = self.racks != {None}
        self.load = Counter({b: 0 for b in self.targets})
        for replicas in self.parts.values():
            self.load.update(r for r in replicas if r in self.rack)
        self.share = final_shares(self.load, sum(len(r) for r in self.parts.values()))

    def rack_of(self, broker: int) -> str | None:
        return self.rack.get(broker)

    def spread(self, replicas: Iterable[int]) -> int:
        return len({self.rack_of(r) for r in replicas})

    def wanted_spread(self, replicas: Sequence[int]) -> int:
        return min(len(replicas), len(self.racks)) if self.rack_aware else 0

    def replace(self, key: Key, old: int, new: int) -> None:
        replicas = self.parts[key]
        replicas[replicas.index(old)] = new
        if old in self.load:
            self.load[old] -= 1
        self.load[new] += 1

    def candidates(self, key: Key, without: int | None = None) -> list[int]:
        """Target brokers that could join the partition in place of `without`, best first:
        those adding a rack the partition lacks, then the furthest below their final share,
        then the least loaded, then the lowest id."""
        kept = [r for r in self.parts[key] if r != without]
        have = {self.rack_of(r) for r in kept if r in self.rack}
        free = [b for b in self.targets if b not in self.parts[key]]
        return sorted(free, key=lambda b: (self.rack_aware and self.rack_of(b) in have,
                                           self.load[b] - self.share[b], self.load[b], b))


def plan_rebalance(assignment: Mapping[Key, Sequence[int]], brokers: Sequence[Broker],
                   sizes: Mapping[Key, int] | None = None) -> Assignment:
    """The partitions whose replicas change, with their new replica lists (see module doc)."""
    if not brokers:
        raise ValueError("no target brokers")
    sizes = sizes or {}
    layout = _Layout(assignment, brokers)
    for key in layout.parts:
        if len(layout.parts[key]) > len(layout.targets):
            raise ValueError(f"{key[0]}-{key[1]} has {len(layout.parts[key])} replicas; only "
                             f"{len(layout.targets)} target brokers")
    _replace_departed(layout)
    _widen_rack_spread(layout)
    _level_replicas(layout, sizes)
    _level_leaders(layout)
    return {k: tuple(v) for k, v in layout.parts.items() if tuple(v) != tuple(assignment[k])}


def _replace_departed(layout: _Layout) -> None:
    # Partitions whose kept replicas sit on brokers short of their share have fewer good
    # places left: they choose first.
    def room_taken(key: Key) -> int:
        return sum(max(0, layout.share[r] - layout.load[r]) for r in layout.parts[key]
                   if r in layout.rack)
    for key in sorted(layout.parts, key=lambda k: (-room_taken(k), k)):
        replicas = layout.parts[key]
        for old in [r for r in replicas if r not in layout.rack]:
            layout.replace(key, old, layout.candidates(key, without=old)[0])


def _widen_rack_spread(layout: _Layout) -> None:
    if not layout.rack_aware:
        return
    for key, replicas in layout.parts.items():
        while layout.spread(replicas) < layout.wanted_spread(replicas):
            counts = Counter(layout.rack_of(r) for r in replicas)
            # Move the most loaded replica of a crowded rack (never the preferred leader
            # when another choice exists) to the least loaded broker of a missing rack.
            crowded = [r for r in replicas if counts[layout.rack_of(r)] > 1]
            old = max(crowded, key=lambda r: (r != replicas[0], layout.load[r], r))
            fresh = [b for b in layout.candidates(key, without=old)
                     if layout.rack_of(b) not in counts]
            layout.replace(key, old, fresh[0])


def _move_keeps_spread(layout: _Layout, key: Key, old: int, new: int) -> bool:
    if not layout.rack_aware:
        return True
    replicas = layout.parts[key]
    after = [new if r == old else r for r in replicas]
    return layout.spread(after) >= min(layout.spread(replicas), layout.wanted_spread(replicas))


def _level_replicas(layout: _Layout, sizes: Mapping[Key, int]) -> None:
    by_size = sorted(layout.parts, key=lambda k: (sizes.get(k, 0), k))
    while True:
        order = sorted(layout.targets, key=lambda b: (layout.load[b], b))
        moved = False
        # Most loaded source first, least loaded destination first; the first feasible move.
        for src in reversed(order):
            for dst in order:
                if layout.load[src] - layout.load[dst] <= 1:
                    break
                # Free first: replicas this plan placed move on at no extra copy, along a
                # chain if need be (src -> x in one partition, x -> dst in another).
                chain = _free_chain(layout, src, dst)
                if chain is None:
                    key = next((k for k in by_size if src in layout.parts[k]
                                and dst not in layout.parts[k]
                                and _move_keeps_spread(layout, k, src, dst)), None)
                    chain = [(key, src, dst)] if key is not None else None
                if chain:
                    for key, a, b in chain:
                        layout.replace(key, a, b)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def _free_chain(layout: _Layout, src: int, dst: int) -> list[tuple[Key, int, int]] | None:
    """The shortest chain of moves of replicas placed by this plan whose net effect is one
    replica less on src and one more on dst, at no extra copy."""
    placed: dict[int, list[Key]] = {}
    for key, replicas in layout.parts.items():
        for r in replicas:
            if r not in layout.original[key]:
                placed.setdefault(r, []).append(key)
    return _shortest_chain(src, dst, placed, lambda a, key: (
        b for b in layout.targets
        if b not in layout.parts[key] and _move_keeps_spread(layout, key, a, b)))


def _shortest_chain(src: int, dst: int, holds: Mapping[int, Sequence[Key]],
                    next_brokers: Callable[[int, Key], Iterable[int]]
                    ) -> list[tuple[Key, int, int]] | None:
    """Breadth-first from src to dst: each hop passes something of partition `key` that
    broker a holds (``holds[a]``) to a broker b of ``next_brokers(a, key)``. The hops as
    (key, a, b), first hop first; None when dst cannot be reached."""
    came_from: dict[int, tuple[int, Key]] = {}
    frontier, seen = [src], {src}
    while frontier:
        nxt = []
        for a in frontier:
            for key in holds.get(a, ()):
                for b in next_brokers(a, key):
                    if b in seen:
                        continue
                    seen.add(b)
                    came_from[b] = (a, key)
                    if b == dst:
                        chain, at = [], dst
                        while at != src:
                            prev, k = came_from[at]
                            chain.append((k, prev, at))
                            at = prev
                        return chain[::-1]
                    nxt.append(b)
        frontier = nxt
    return None


def _level_leaders(layout: _Layout) -> None:
    """Reorders replicas until preferred-leader counts differ by at most one where reordering
    can get there: leadership passes along a chain (a leads a partition b holds, b leads one
    c holds, ...), so a broker that shares no partition with the busiest one still gains."""
    leaders = Counter({b: 0 for b in layout.targets})
    leaders.update(r[0] for r in layout.parts.values())
    while True:
        order = sorted(layout.targets, key=lambda b: (leaders[b], b))
        path = None
        for src in reversed(order):
            for dst in order:
                if leaders[src] - leaders[dst] <= 1:
                    break
                path = _leader_chain(layout, src, dst)
                if path:
                    leaders[src] -= 1
                    leaders[dst] += 1
                    break
            if path:
                break
        if not path:
            return
        for key, new_leader in path:
            replicas = layout.parts[key]
            replicas.remove(new_leader)
            replicas.insert(0, new_leader)


def _leader_chain(layout: _Layout, src: int, dst: int) -> list[tuple[Key, int]] | None:
    """The shortest chain of leadership hand-overs from src to dst: (partition, new leader)."""
    led: dict[int, list[Key]] = {}
    for key, replicas in layout.parts.items():
        led.setdefault(replicas[0], []).append(key)
    chain = _shortest_chain(src, dst, led, lambda _a, key: layout.parts[key][1:])
    return None if chain is None else [(key, b) for key, _a, b in chain]


def resize_replicas(assignment: Mapping[Key, Sequence[int]], topic: str, new_rf: int,
                    brokers: Sequence[Broker]) -> Assignment:
    """A topic's partitions at replication factor `new_rf`; only the changed partitions.

    Growing keeps every replica in its place and appends brokers of racks the partition lacks
    first, then the least loaded (load counted over the whole assignment). Shrinking keeps the
    preferred leader and drops replicas of crowded racks first, then the most loaded."""
    if new_rf < 1:
        raise ValueError(f"replication factor must be at least 1, got {new_rf}")
    if new_rf > len(brokers):
        raise ValueError(f"replication factor {new_rf} needs {new_rf} brokers; there are "
                         f"{len(brokers)}")
    layout = _Layout(assignment, brokers)
    changed: Assignment = {}
    for key in sorted(k for k in layout.parts if k[0] == topic):
        replicas = layout.parts[key]
        before = tuple(replicas)
        while len(replicas) < new_rf:
            new = layout.candidates(key)[0]
            replicas.append(new)
            layout.load[new] += 1
        while len(replicas) > new_rf:
            counts = Counter(layout.rack_of(r) for r in replicas)
            drop = max(replicas[1:], key=lambda r: (
                layout.rack_aware and counts[layout.rack_of(r)] > 1, r not in layout.rack,
                layout.load[r], r))
            replicas.remove(drop)
            if drop in layout.load:
                layout.load[drop] -= 1
        if tuple(replicas) != before:
            changed[key] = tuple(replicas)
    return changed


def count_moves(before: Mapping[Key, Sequence[int]], after: Mapping[Key, Sequence[int]]) -> int:
    """Brokers added to replica sets (what costs a data copy); `after` may hold only the
    changed partitions."""
    return sum(len(set(after[k]) - set(before.get(k, ()))) for k in after)


def balance(assignment: Mapping[Key, Sequence[int]],
            brokers: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Broker -> (replicas, preferred leaderships)."""
    out = {b: [0, 0] for b in brokers}
    for replicas in assignment.values():
        for i, r in enumerate(replicas):
            if r in out:
                out[r][0] += 1
                out[r][1] += i == 0
    return {b: (n, lead) for b, (n, lead) in out.items()}


def final_shares(load: Mapping[int, int], total: int) -> dict[int, int]:
    """Each target's replica count once levelled: total / brokers, the most loaded brokers
    keeping the one-larger shares (which is what makes the fewest moves)."""
    targets = sorted(load)
    q, extra = divmod(total, len(targets))
    ranked = sorted(targets, key=lambda b: (-load[b], b))
    return {b: q + (1 if i < extra else 0) for i, b in enumerate(ranked)}


def minimum_moves(assignment: Mapping[Key, Sequence[int]], targets: Iterable[int],
                  racks: Mapping[int, str | None] | None = None) -> int:
    """The fewest moves that leave every replica on a target with the replica counts levelled.

    Without racks: the replicas on departing brokers plus what the targets hold above their
    final shares (the most loaded keep the larger shares). That is exact for RF = 1; with
    RF > 1 it is a lower bound, since a partition's replicas must stay on distinct brokers
    and the brokers short of their share may be too few to take them without moving another
    replica out of the way. With racks, where every partition has one replica in each of the
    targets' racks (RF = number of racks), replicas can only move within their rack and hold
    one replica per partition there, so the same count taken rack by rack is exact.
    Otherwise the rack-blind count is returned (a plan may then need fewer or more)."""
    targets = sorted(targets)
    if racks and None not in {racks.get(b) for b in targets}:
        names = {racks[b] for b in targets}
        if all(len(r) == len(names) and {racks.get(b) for b in r} == names
               for r in assignment.values()):
            return sum(_blind_minimum(
                {k: tuple(b for b in r if racks.get(b) == name) for k, r in assignment.items()},
                [b for b in targets if racks[b] == name]) for name in sorted(names))
    return _blind_minimum(assignment, targets)


def _blind_minimum(assignment: Mapping[Key, Sequence[int]], targets: list[int]) -> int:
    load = Counter({b: 0 for b in targets})
    forced = 0
    total = 0
    for replicas in assignment.values():
        total += len(replicas)
        for r in replicas:
            if r in load:
                load[r] += 1
            else:
                forced += 1
    shares = final_shares(load, total)
    return forced + sum(max(0, load[b] - shares[b]) for b in targets)
