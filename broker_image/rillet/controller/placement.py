"""Rack-aware replica placement (pure).

Brokers are interleaved by rack (a1, b1, c1, a2, b2, ...) so consecutive
positions sit in different racks; partition p's leader is position
(start + p) mod n, and its followers are chosen walking forward with a
per-round shift, preferring brokers in racks the partition does not use yet.
Leaders and replicas spread evenly; with at least rf racks, every partition
spans rf racks.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


class PlacementError(ValueError):
    pass


@dataclass(frozen=True)
class BrokerSlot:
    """A live broker replicas may be placed on, with its rack."""
    node_id: int
    rack: str | None


def rack_alternated(brokers: list[BrokerSlot]) -> list[BrokerSlot]:
    by_rack: dict[str | None, list[BrokerSlot]] = defaultdict(list)
    for b in sorted(brokers, key=lambda b: b.node_id):
        by_rack[b.rack].append(b)
    racks = sorted(by_rack, key=lambda r: (r is None, r or ""))
    out: list[BrokerSlot] = []
    depth = max((len(v) for v in by_rack.values()), default=0)
    for i in range(depth):
        for rack in racks:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
    return out


def assign(brokers: list[BrokerSlot], partitions: int, replication_factor: int, *,
           first_partition: int = 0, start_index: int = 0) -> dict[int, list[int]]:
    """Replica lists for partitions first_partition .. first_partition+partitions-1."""
    if replication_factor < 1:
        raise PlacementError(f"replication factor must be at least 1, got {replication_factor}")
    if partitions < 1:
        raise PlacementError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available broker(s)")
    ordered = rack_alternated(brokers)
    n = len(ordered)
    result: dict[int, list[int]] = {}
    # Replicas placed so far by this call: a follower goes to the least loaded candidate,
    # so a few partitions over many brokers do not pile up on neighbours.
    load = {b.node_id: 0 for b in ordered}
    for p in range(first_partition, first_partition + partitions):
        leader_pos = (start_index + p) % n
        shift = 1 + (p // n) % max(n - 1, 1) if n > 1 else 0
        chosen = [ordered[leader_pos]]
        pos = leader_pos
        while len(chosen) < replication_factor:
            pos = (pos + shift) % n
            candidates = [c for c in (ordered[(pos + k) % n] for k in range(n))
                          if c not in chosen]
            used_racks = {b.rack for b in chosen}
            fresh = [c for c in candidates if c.rack not in used_racks]
            pool = fresh or candidates
            # min() keeps the first of equals: the walk order breaks ties.
            pick = min(pool, key=lambda c: load[c.node_id])
            chosen.append(pick)
            pos = ordered.index(pick)
        for b in chosen:
            load[b.node_id] += 1
        result[p] = [b.node_id for b in chosen]
    return result
