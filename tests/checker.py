"""What a replicated log owes its producers, checked from the outside.

Given the writes a producer had acknowledged (in the order the acknowledgements came) and
the records a consumer read back, per partition:
- lost:        an acknowledged write that was never read back in its partition
- duplicates:  one write stored at more than one offset
- order:       a write acknowledged after another (same producer) but stored before it
- conflicts:   one offset read twice with different contents, i.e. two replicas that
               disagree, each of which served a consumer
- unacked:     records read back that no acknowledged write explains (a write whose
               acknowledgement was lost may legitimately be stored): counted, not an error

A write is known by its (key, value), so a workload must make those unique per partition
(a sequence number in the value will do). Reading the same offset twice with the same
contents is a consumer re-read (e.g. after a rebalance), not a duplicate.

Pure: no clients, no clock; the caller collects both lists however it likes.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, NamedTuple

Payload = tuple[bytes | None, bytes | None]   # (key, value): how a write is recognised


class Write(NamedTuple):
    """A write the producer was told succeeded."""
    partition: int
    key: bytes | None
    value: bytes | None
    producer: str = ""   # order is only promised between writes of one producer


class Read(NamedTuple):
    """A record a consumer got back."""
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Duplicate:
    key: bytes | None
    value: bytes | None
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class OrderViolation:
    """`later` was acknowledged after `earlier` but sits at a lower offset."""
    earlier: Write
    earlier_offset: int
    later: Write
    later_offset: int


@dataclass(frozen=True)
class OffsetConflict:
    offset: int
    first: Read
    second: Read


@dataclass(frozen=True)
class PartitionReport:
    partition: int
    acked: int
    read: int                  # distinct offsets read
    lost: tuple[Write, ...]
    duplicates: tuple[Duplicate, ...]
    order_violations: tuple[OrderViolation, ...]
    conflicts: tuple[OffsetConflict, ...]
    unacked: int

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.order_violations or self.conflicts)

    def summary(self) -> str:
        return (f"partition {self.partition}: {self.acked} acked, {self.read} read, "
                f"{len(self.lost)} lost, {len(self.duplicates)} duplicated, "
                f"{len(self.order_violations)} out of order, {len(self.conflicts)} conflicting "
                f"offsets, {self.unacked} unacknowledged read")


@dataclass(frozen=True)
class CheckReport:
    partitions: dict[int, PartitionReport]

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions.values())

    @property
    def lost(self) -> list[Write]:
        return [w for p in self.partitions.values() for w in p.lost]

    def summary(self, examples: int = 3) -> str:
        """One line a partition, and a few examples of each problem, for an assertion."""
        lines = []
        for p in sorted(self.partitions):
            report = self.partitions[p]
            lines.append(report.summary())
            for name in ("lost", "duplicates", "order_violations", "conflicts"):
                for item in getattr(report, name)[:examples]:
                    lines.append(f"  {name}: {item}")
        return "\n".join(lines)


def check(acked: Iterable[Write | tuple], read: Iterable[Read | tuple]) -> CheckReport:
    """Compare acknowledged writes (in acknowledgement order) with the records read back."""
    writes: dict[int, list[Write]] = defaultdict(list)
    for w in acked:
        w = Write(*w)
        writes[w.partition].append(w)
    reads: dict[int, list[Read]] = defaultdict(list)
    for r in read:
        r = Read(*r)
        reads[r.partition].append(r)
    return CheckReport({p: check_partition(p, writes[p], reads[p])
                        for p in sorted(set(writes) | set(reads))})


def check_partition(partition: int, acked: list[Write], read: list[Read]) -> PartitionReport:
    log, conflicts = _log_by_offset(read)
    offsets = _offsets_by_payload(log)
    acked_payloads = {(w.key, w.value) for w in acked}
    # Read at all counts as not lost, even when a conflicting read at its offset came first.
    seen = {(r.key, r.value) for r in read}
    return PartitionReport(
        partition=partition,
        acked=len(acked),
        read=len(log),
        lost=tuple(w for w in acked if (w.key, w.value) not in seen),
        duplicates=tuple(Duplicate(key, value, tuple(found))
                         for (key, value), found in offsets.items() if len(found) > 1),
        order_violations=tuple(_order_violations(acked, offsets)),
        conflicts=tuple(conflicts),
        unacked=sum(1 for payload in offsets if payload not in acked_payloads),
    )


def _log_by_offset(read: list[Read]) -> tuple[dict[int, Read], list[OffsetConflict]]:
    """offset -> the record first read there, and every later read that disagreed."""
    log: dict[int, Read] = {}
    conflicts: list[OffsetConflict] = []
    for r in read:
        first = log.setdefault(r.offset, r)
        if (first.key, first.value) != (r.key, r.value):
            conflicts.append(OffsetConflict(r.offset, first, r))
    return dict(sorted(log.items())), conflicts


def _offsets_by_payload(log: dict[int, Read]) -> dict[Payload, list[int]]:
    found: dict[Payload, list[int]] = defaultdict(list)
    for offset, r in log.items():
        found[(r.key, r.value)].append(offset)
    return found


def _order_violations(acked: list[Write],
                      offsets: dict[Payload, list[int]]) -> list[OrderViolation]:
    """Walk each producer's writes in acknowledgement order; each must be stored after the
    highest-stored write acknowledged before it. Lost writes are left to `lost`."""
    highest: dict[str, tuple[Write, int]] = {}
    violations: list[OrderViolation] = []
    for w in acked:
        found = offsets.get((w.key, w.value))
        if not found:
            continue
        offset = found[0]
        top = highest.get(w.producer)
        if top is not None and offset < top[1]:
            violations.append(OrderViolation(top[0], top[1], w, offset))
        else:
            highest[w.producer] = (w, offset)
    return violations


# -- exactly once through transactions -------------------------------------------------------
#
# A transactional ETL copies every input record to an output topic, tagging each copy with the
# transaction attempt that wrote it (an attempt committed, aborted, or of unknown outcome when
# the client lost track under a fault). Read back with read_committed, the output owes:
# - every input exactly once (no duplicates, nothing missing),
# - nothing from an attempt the coordinator was told to abort,
# - nothing that is not a copy of an input.


class Copy(NamedTuple):
    """An output record read back: which input it copies, and which attempt wrote it."""
    source: bytes
    attempt: int


@dataclass(frozen=True)
class ExactlyOnceReport:
    inputs: int
    outputs: int
    duplicates: dict[bytes, int]      # input -> how many copies (> 1) were read
    missing: tuple[bytes, ...]
    aborted_visible: tuple[Copy, ...]
    strays: tuple[Copy, ...]          # copies of records that were never input

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.aborted_visible or self.strays)

    def summary(self, examples: int = 5) -> str:
        return (f"{self.inputs} input records, {self.outputs} output records, "
                f"{len(self.duplicates)} duplicated, {len(self.missing)} missing, "
                f"{len(self.aborted_visible)} from aborted transactions visible, "
                f"{len(self.strays)} not from an input"
                + "".join(f"\n  {name}: {list(getattr(self, name))[:examples]}"
                          for name in ("duplicates", "missing", "aborted_visible", "strays")
                          if getattr(self, name)))


def check_exactly_once(inputs: Iterable[bytes], outputs: Iterable[Copy | tuple],
                       aborted: Iterable[int]) -> ExactlyOnceReport:
    """Compare the inputs with the copies read back (read_committed) and the attempts whose
    abort the coordinator acknowledged."""
    wanted = list(inputs)
    copies = [Copy(*c) for c in outputs]
    aborted_attempts = set(aborted)
    counts: dict[bytes, int] = defaultdict(int)
    for c in copies:
        counts[c.source] += 1
    known = set(wanted)
    return ExactlyOnceReport(
        inputs=len(wanted),
        outputs=len(copies),
        duplicates={s: n for s, n in counts.items() if n > 1},
        missing=tuple(s for s in wanted if s not in counts),
        aborted_visible=tuple(c for c in copies if c.attempt in aborted_attempts),
        strays=tuple(c for c in copies if c.source not in known),
    )
