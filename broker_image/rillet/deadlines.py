"""DeadlineQueue: keys, each with the time it next needs a look; pure bookkeeping, no clock.

A periodic pass over every partition costs the same on an idle node as on a busy one. With
each key scheduled at the earliest time its check could find anything (a follower that could
fall out of the ISR, a log whose flush.ms could elapse), a pass takes only the keys whose
time came (`pop_due`), so its cost follows what can change, not how many keys there are.

A key has at most one deadline: scheduling it again replaces the old one (a heap entry that
no longer matches its key's deadline is skipped when it surfaces, and the heap is rebuilt
once such stale entries outnumber the live ones, so it stays bounded).

Not thread-safe: used from the event loop only.
"""
from __future__ import annotations

import heapq
import itertools
import math
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


class DeadlineQueue(Generic[K]):
    def __init__(self) -> None:
        self._deadline: dict[K, float] = {}
        # (deadline, sequence, key): the sequence keeps keys that do not compare out of ties.
        self._heap: list[tuple[float, int, K]] = []
        self._sequence = itertools.count()

    def schedule(self, key: K, at: float) -> None:
        """`key` needs a look once `at` comes (replacing any earlier schedule); math.inf: never
        (until scheduled again)."""
        if math.isinf(at) and at > 0:
            self.discard(key)
            return
        if self._deadline.get(key) == at:
            return
        self._deadline[key] = at
        heapq.heappush(self._heap, (at, next(self._sequence), key))
        if len(self._heap) > 2 * len(self._deadline) + 64:
            self._compact()

    def discard(self, key: K) -> None:
        self._deadline.pop(key, None)

    def deadline(self, key: K) -> float | None:
        return self._deadline.get(key)

    def pop_due(self, now: float) -> list[K]:
        """The keys whose deadline is at or before `now`, earliest first; they leave the
        queue (the caller schedules again what still needs a look)."""
        due: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._deadline.get(key) == at:
                del self._deadline[key]
                due.append(key)
        return due

    def __len__(self) -> int:
        return len(self._deadline)

    def __contains__(self, key: object) -> bool:
        return key in self._deadline

    def _compact(self) -> None:
        self._heap = [(at, next(self._sequence), key) for key, at in self._deadline.items()]
        heapq.heapify(self._heap)
