"""Leader-epoch cache: (epoch, start offset) pairs, persisted as ``leader-epoch-checkpoint``.

The file uses Kafka's checkpoint text format: a version line ("0"), a count
line, then one "<epoch> <start_offset>" line per entry. It is rewritten with
tmp + rename when an entry is added or truncated (rare: once per leader
change); the fsync comes with the next log flush. A missing or unreadable file
is not fatal: recovery re-assigns epochs from the partition_leader_epoch of the
batches it rescans.

Not thread-safe: owned by its PartitionLog, used from the event loop thread.
"""
from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED = (-1, -1)


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / CHECKPOINT_NAME
        self.entries: list[tuple[int, int]] = []
        self.dirty = False  # written but not yet fsynced

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def load(self) -> None:
        try:
            lines = self.path.read_text().split("\n")
            count = int(lines[1])
            entries = [tuple(map(int, line.split())) for line in lines[2:2 + count]]
            if lines[0].strip() != "0" or len(entries) != count or any(len(e) != 2 for e in entries):
                raise ValueError("bad checkpoint")
            self.entries = [(e[0], e[1]) for e in entries]
        except (OSError, ValueError, IndexError):
            self.entries = []

    def serialize(self) -> bytes:
        body = "".join(f"{epoch} {offset}\n" for epoch, offset in self.entries)
        return f"0\n{len(self.entries)}\n{body}".encode()

    def _write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(self.serialize())
        os.replace(tmp, self.path)
        self.dirty = True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return False
        # An older entry starting at or after this offset was truncated away in Kafka; same here.
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._write()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, its end offset), as Kafka's LeaderEpochFileCache.endOffsetFor."""
        if epoch < 0 or not self.entries:
            return UNDEFINED
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED  # requested epoch is newer than anything known
        next_start = self.entries[higher][1]
        if higher == 0:
            return epoch, next_start  # older than every known epoch
        return self.entries[higher - 1][0], next_start

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1][1] >= end_offset:
            keep -= 1
        if keep != len(self.entries):
            del self.entries[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved: entries before it collapse into one starting at ``start_offset``."""
        before = [i for i, (_, off) in enumerate(self.entries) if off < start_offset]
        if not before:
            return
        last = before[-1]
        epoch = self.entries[last][0]
        self.entries = [(epoch, start_offset)] + self.entries[last + 1:]
        self._write()
