"""Pure pieces of mission.py (no cluster): a long wait says where it is while it waits."""
from __future__ import annotations

import mission
from mission import Mission

STATUS = {"readyBrokers": 4, "conditions": [
    {"type": "Ready", "status": "False", "reason": "Rebalancing",
     "message": "moving 3/8 partitions"}]}


class FakeKube:
    """Answers the Cluster with STATUS; wait_for polls the check on a clock the test moves."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def request(self, method: str, path: str, *args, **kwargs) -> dict:
        return {"status": STATUS}

    def wait_for(self, what, check, timeout, interval=0.5):
        for _ in range(100):
            self.clock[0] += 5.0
            if check():
                return True
        raise TimeoutError(what)


def test_a_long_wait_reports_its_time_and_the_clusters_progress(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(mission.time, "monotonic", lambda: clock[0])
    lines: list[str] = []
    m = Mission(FakeKube(clock), "kubeconfig", "ns", report=lines.append)
    polls = iter(range(13))   # answers on the 13th poll: 60 s of waiting
    m.wait("moves done", lambda: next(polls) == 12, timeout=600)
    assert lines == [f"... moves done: {s}s so far; 4 brokers ready; Rebalancing: moving 3/8 "
                     f"partitions" for s in (15, 30, 45, 60)]


def test_quick_waits_say_nothing(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(mission.time, "monotonic", lambda: clock[0])
    lines: list[str] = []
    Mission(FakeKube(clock), "kubeconfig", "ns", report=lines.append).wait(
        "ready", lambda: True, timeout=60)
    assert lines == []
