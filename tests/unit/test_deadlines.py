"""DeadlineQueue: each key at most once, due keys in deadline order, replaced deadlines never
surface twice, and the heap stays bounded however often keys are rescheduled."""
from __future__ import annotations

import math
import random

from rillet.deadlines import DeadlineQueue


def test_due_keys_come_out_in_order_and_leave_the_queue() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    q.schedule("b", 20)
    q.schedule("a", 10)
    q.schedule("c", 30)
    assert q.pop_due(5) == []
    assert q.pop_due(20) == ["a", "b"]
    assert "a" not in q and "c" in q and len(q) == 1
    assert q.pop_due(20) == []
    assert q.pop_due(100) == ["c"] and len(q) == 0


def test_scheduling_again_replaces_the_deadline_either_way() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    q.schedule("late", 10)
    q.schedule("late", 50)     # later: not due at its old time
    q.schedule("early", 50)
    q.schedule("early", 5)     # earlier: due at its new time, once
    assert q.pop_due(10) == ["early"]
    assert q.pop_due(49) == []
    assert q.pop_due(50) == ["late"]
    assert q.pop_due(1000) == []


def test_never_and_discard_take_the_key_out() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    q.schedule("never", 10)
    q.schedule("never", math.inf)
    q.schedule("gone", 10)
    q.discard("gone")
    q.discard("unknown")
    assert len(q) == 0 and q.pop_due(math.inf) == []
    q.schedule("gone", 12)     # back after a discard: its new deadline counts
    assert q.deadline("gone") == 12 and q.pop_due(11) == [] and q.pop_due(12) == ["gone"]


def test_matches_a_plain_dict_model_and_stays_bounded() -> None:
    rng = random.Random(25)
    q: DeadlineQueue[int] = DeadlineQueue()
    model: dict[int, float] = {}
    now = 0.0
    for _ in range(20000):
        key = rng.randrange(50)
        op = rng.random()
        if op < 0.6:
            at = now + rng.randrange(0, 100)
            q.schedule(key, at)
            model[key] = at
        elif op < 0.7:
            q.discard(key)
            model.pop(key, None)
        else:
            now += rng.randrange(0, 20)
            due = q.pop_due(now)
            expected = sorted((at, k) for k, at in model.items() if at <= now)
            assert sorted(due) == sorted(k for _, k in expected)
            assert [model[k] for k in due] == sorted(model[k] for k in due)
            for k in due:
                del model[k]
        assert len(q) == len(model)
        assert len(q._heap) <= 2 * len(model) + 65   # stale entries are compacted away
