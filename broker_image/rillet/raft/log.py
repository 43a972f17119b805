"""The replicated log as the Raft core sees it, and an in-memory one for the simulator.

The core never parses records: the leader appends entries it is given, a
follower appends whatever the leader's Fetch response carried. Durability is
the shell's business (the Flush effect); `MemoryLog` models it with a flushed
mark so a simulated crash loses exactly the unflushed tail.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...          # first offset still in the log (after a snapshot)

    @property
    def end_offset(self) -> int: ...            # offset of the next entry

    @property
    def last_epoch(self) -> int: ...            # epoch of the last entry (or of the snapshot)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends); (-1, -1) if none."""
        ...

    def append_as_leader(self, entries: list[Any], epoch: int) -> int:
        """Append `entries` at `epoch`; returns the last offset."""
        ...

    def append_leader_change(self, epoch: int, leader_id: int) -> int: ...

    def append_as_follower(self, records: Any) -> None: ...

    def read(self, offset: int, max_entries: int) -> Any: ...

    def truncate_to(self, offset: int) -> None: ...

    def snapshot(self) -> tuple[int, int] | None:
        """(end offset, epoch) of the latest snapshot, if any."""
        ...


# (last offset, decoded entries, size in bytes) of one committed batch, as on_commit gets it.
CommittedBatch = tuple[int, list[Any], int]


class ReplicatedLog(RaftLog, Protocol):
    """The RaftLog the I/O shell (raft.node) drives: durable flushes, the committed mark and
    reads of what is committed. The owner of the log (the metadata log for the quorum) gives
    it to the node, so raft never learns what the entries mean."""

    async def flush(self) -> int:
        """fsync what was appended; returns the durable end offset."""
        ...

    def set_high_watermark(self, offset: int) -> None: ...

    def committed_batches(self, start: int, end: int) -> Iterable[CommittedBatch]:
        """Every batch in [start, end), oldest first."""
        ...


@dataclass(frozen=True)
class Entry:
    """One entry of the simulator's in-memory log: its epoch and what it carries."""
    epoch: int
    payload: Any


@dataclass
class MemoryLog:
    """A RaftLog in memory; `flushed` entries survive a simulated crash."""
    entries: list[Entry] = field(default_factory=list)
    flushed: int = 0
    # Entries below base were compacted into a snapshot: (end offset, epoch).
    base: int = 0
    base_epoch: int = -1
    snapshot_payloads: list[Entry] = field(default_factory=list)

    @property
    def start_offset(self) -> int:
        return self.base

    @property
    def end_offset(self) -> int:
        return self.base + len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self.base_epoch

    def epoch_at(self, offset: int) -> int:
        return self.entries[offset - self.base].epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found = -1
        end = -1
        for i, e in enumerate(self.entries):
            if e.epoch <= epoch:
                found, end = e.epoch, self.base + i + 1
            else:
                break
        if found == -1 and self.base_epoch != -1 and self.base_epoch <= epoch:
            return self.base_epoch, self.base
        return found, end

    def append_as_leader(self, entries: list[Any], epoch: int) -> int:
        self.entries.extend(Entry(epoch, p) for p in entries)
        return self.end_offset - 1

    def append_leader_change(self, epoch: int, leader_id: int) -> int:
        return self.append_as_leader([("leader_change", leader_id, epoch)], epoch)

    def append_as_follower(self, records: list[tuple[int, Entry]]) -> None:
        for offset, entry in records:
            assert offset == self.end_offset, (offset, self.end_offset)
            self.entries.append(entry)

    def read(self, offset: int, max_entries: int) -> list[tuple[int, Entry]]:
        i = offset - self.base
        return [(self.base + j, self.entries[j])
                for j in range(i, min(len(self.entries), i + max_entries))]

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset - self.base:]
        self.flushed = min(self.flushed, self.end_offset)

    def flush(self) -> int:
        self.flushed = self.end_offset
        return self.flushed

    def crash(self) -> None:
        """Lose everything that was not flushed."""
        self.truncate_to(max(self.flushed, self.base))

    def snapshot(self) -> tuple[int, int] | None:
        return (self.base, self.base_epoch) if self.base > 0 else None

    def take_snapshot(self, end_offset: int) -> None:
        """Compact entries below `end_offset` (all committed) into the snapshot."""
        keep_from = end_offset - self.base
        self.snapshot_payloads = self.snapshot_payloads + self.entries[:keep_from]
        self.base_epoch = self.entries[keep_from - 1].epoch
        self.entries = self.entries[keep_from:]
        self.base = end_offset

    def install_snapshot(self, end_offset: int, epoch: int, payloads: list[Entry]) -> None:
        self.entries = []
        self.base, self.base_epoch = end_offset, epoch
        self.snapshot_payloads = list(payloads)
        self.flushed = end_offset

    def payloads(self) -> list[Entry]:
        """Every entry the log holds, the snapshot's included, in order."""
        return self.snapshot_payloads + self.entries
