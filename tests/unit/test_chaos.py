"""The chaos loop against a fake cluster: bounded, seeded, always restored, hooks called."""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest

from tests.chaos import (ADDRESSED_FAULTS, FAULTS, ChaosEvent, ChaosPlan, Fault, fault_counts,
                         fault_report, pick_fault, run_chaos)

NO_WAIT = dict(hold=(0.0, 0.0), settle=(0.0, 0.0))


@dataclass
class FakeCluster:
    """Records what chaos asks for and keeps just enough state to tell 'restored'."""
    proxied: bool = True
    addressed: bool = False
    clocked: bool = False
    disked: bool = False
    clocks: dict[int, float] = field(default_factory=dict)
    failed_disks: set[int] = field(default_factory=set)
    node_ids: list[int] = field(default_factory=lambda: [1, 2, 3])
    calls: list[tuple] = field(default_factory=list)
    down: set[int] = field(default_factory=set)
    paused: set[int] = field(default_factory=set)
    cut_links: set[frozenset[int]] = field(default_factory=set)
    fail_on: str | None = None
    fail_with: type[BaseException] = RuntimeError

    def _call(self, *call: object) -> None:
        self.calls.append(call)
        if call[0] == self.fail_on:
            raise self.fail_with(f"{call[0]} failed")

    def kill_node(self, node_id: int) -> None:
        self._call("kill_node", node_id)
        self.down.add(node_id)

    def stop_node(self, node_id: int) -> int:
        self._call("stop_node", node_id)
        self.down.add(node_id)
        return 0

    def start_node(self, node_id: int) -> None:
        self._call("start_node", node_id)
        self.down.discard(node_id)

    def pause_node(self, node_id: int) -> None:
        self._call("pause_node", node_id)
        self.paused.add(node_id)

    def resume_node(self, node_id: int) -> None:
        self._call("resume_node", node_id)
        self.paused.discard(node_id)

    def cut(self, a: int, b: int, mode: str) -> None:
        self._call("cut", a, b, mode)
        self.cut_links.add(frozenset((a, b)))

    def heal(self, a: int, b: int) -> None:
        self._call("heal", a, b)
        self.cut_links.discard(frozenset((a, b)))

    def isolate(self, node_id: int, mode: str) -> None:
        self._call("isolate", node_id, mode)
        self.cut_links |= {frozenset((node_id, o)) for o in self.node_ids if o != node_id}

    def cut_one_way(self, a: int, b: int, mode: str) -> None:
        self._call("cut_one_way", a, b, mode)
        self.cut_links.add(frozenset((a, b)))

    def slow(self, a: int, b: int, seconds: float) -> None:
        self._call("slow", a, b, seconds)
        self.cut_links.add(frozenset((a, b)))

    def step_clock(self, node_id: int, seconds: float) -> None:
        self._call("step_clock", node_id, seconds)
        self.clocks[node_id] = self.clocks.get(node_id, 0.0) + seconds

    def fail_disk(self, node_id: int) -> None:
        self._call("fail_disk", node_id)
        self.failed_disks.add(node_id)

    def repair_disk(self, node_id: int) -> None:
        self._call("repair_disk", node_id)
        self.failed_disks.discard(node_id)

    def heal_all(self) -> None:
        self._call("heal_all")
        self.cut_links.clear()

    def restore_all(self) -> None:
        self.calls.append(("restore_all",))
        self.down.clear()
        self.paused.clear()
        self.cut_links.clear()
        self.clocks.clear()
        self.failed_disks.clear()

    @property
    def healthy(self) -> bool:
        return not (self.down or self.paused or self.cut_links or any(self.clocks.values())
                    or self.failed_disks)


def test_each_cycle_injects_then_undoes_one_fault_and_the_end_restores_all() -> None:
    cluster = FakeCluster()
    events = run_chaos(cluster, ChaosPlan(cycles=6, seconds=30, seed=1, **NO_WAIT))
    actions = [e.action for e in events]
    assert actions == ["inject", "undo"] * 6 + ["restore"]
    assert [e.cycle for e in events[:-1]] == [c for c in range(6) for _ in (0, 1)]
    assert events[0].fault == events[1].fault
    assert cluster.calls[-1] == ("restore_all",) and cluster.healthy


def test_the_same_seed_gives_the_same_faults() -> None:
    def faults(seed: int) -> list[Fault | None]:
        return [e.fault for e in run_chaos(FakeCluster(), ChaosPlan(8, 30, seed, **NO_WAIT))]
    assert faults(42) == faults(42)
    assert faults(42) != faults(43)


def test_a_run_stops_at_its_time_bound() -> None:
    plan = ChaosPlan(cycles=1000, seconds=0.3, seed=3, hold=(0.05, 0.05), settle=(0.0, 0.0))
    events = run_chaos(FakeCluster(), plan)
    assert 2 <= len([e for e in events if e.action == "inject"]) < 1000
    assert events[-1].action == "restore" and events[-1].at < 2.0


def test_link_faults_are_skipped_without_proxies() -> None:
    cluster = FakeCluster(proxied=False)
    events = run_chaos(cluster, ChaosPlan(40, 30, 5, **NO_WAIT))
    assert {e.fault.kind for e in events if e.fault} <= {"kill", "stop", "pause"}
    with pytest.raises(ValueError):
        pick_fault(random.Random(0), [1, 2, 3], ("cut",), proxied=False)


def test_picked_faults_name_real_nodes_and_modes() -> None:
    rng = random.Random(9)
    for _ in range(200):
        fault = pick_fault(rng, [1, 2, 3], FAULTS, proxied=True)
        assert set(fault.nodes) <= {1, 2, 3} and len(set(fault.nodes)) == len(fault.nodes)
        assert (fault.mode is not None) == (fault.kind in ("cut", "isolate"))
        assert len(fault.nodes) == (2 if fault.kind == "cut" else 1)
        assert fault.kind not in ADDRESSED_FAULTS


def test_an_addressed_cluster_also_gets_one_way_and_slow_links_and_a_report() -> None:
    cluster = FakeCluster(addressed=True)
    events = run_chaos(cluster, ChaosPlan(60, 30, 8, **NO_WAIT))
    injected = [e.fault for e in events if e.action == "inject" and e.fault]
    assert {f.kind for f in injected} == set(FAULTS) - {"clock", "disk"}
    for fault in injected:
        if fault.kind == "oneway":
            assert fault.mode in ("refuse", "blackhole") and len(set(fault.nodes)) == 2
        if fault.kind == "slow":
            assert fault.delay is not None and 0 < fault.delay <= 0.5
    assert ("cut_one_way", *next(f for f in injected if f.kind == "oneway").nodes) == \
        next(c for c in cluster.calls if c[0] == "cut_one_way")[:3]
    counts = fault_counts(events)
    assert sum(counts.values()) == 60 == len(injected)
    assert counts["slow"] == len([f for f in injected if f.kind == "slow"])
    assert set(counts) >= {"kill", "oneway/blackhole", "cut/refuse"}
    assert fault_report(events).startswith("faults injected: 60 (") and cluster.healthy


def test_a_failing_fault_still_leaves_everything_restored() -> None:
    cluster = FakeCluster(fail_on="heal")
    with pytest.raises(RuntimeError, match="heal failed"):
        run_chaos(cluster, ChaosPlan(50, 30, 11, faults=("cut",), **NO_WAIT))
    assert cluster.calls[-1] == ("restore_all",) and cluster.healthy


def test_an_interrupt_is_not_answered_by_restarting_the_cluster() -> None:
    cluster = FakeCluster(fail_on="kill_node", fail_with=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        run_chaos(cluster, ChaosPlan(50, 30, 11, faults=("kill",), **NO_WAIT))
    assert ("restore_all",) not in cluster.calls


def test_hooks_see_every_event_the_workload_runs_beside_and_check_runs_last() -> None:
    cluster = FakeCluster()
    seen: list[ChaosEvent] = []
    order: list[str] = []

    def workload(stop: threading.Event) -> None:
        order.append("workload started")
        stop.wait(10)
        order.append("workload stopped healthy" if cluster.healthy else "stopped early")

    def check() -> None:
        order.append("check")

    events = run_chaos(cluster, ChaosPlan(3, 30, 2, **NO_WAIT), workload=workload,
                       on_event=seen.append, check=check)
    assert seen == events
    assert order == ["workload started", "workload stopped healthy", "check"]


def test_a_failing_workload_ends_the_run_early_and_is_raised() -> None:
    cluster = FakeCluster()

    def workload(stop: threading.Event) -> None:
        raise AssertionError("lost a write")

    checked: list[bool] = []
    plan = ChaosPlan(cycles=10_000, seconds=20, seed=4, hold=(0.01, 0.01), settle=(0.0, 0.0))
    with pytest.raises(AssertionError, match="lost a write"):
        run_chaos(cluster, plan, workload=workload, check=lambda: checked.append(True))
    assert cluster.healthy and not checked
    assert len([c for c in cluster.calls if c[0] != "restore_all"]) < 10_000


def test_plans_are_checked() -> None:
    with pytest.raises(ValueError):
        ChaosPlan(1, 1, 0, faults=("flood",))
    with pytest.raises(ValueError):
        ChaosPlan(1, 1, 0, hold=(2.0, 1.0))


def test_a_clocked_cluster_gets_clock_steps_each_stepped_back() -> None:
    cluster = FakeCluster(clocked=True)
    events = run_chaos(cluster, ChaosPlan(40, 30, 3, faults=("clock", "kill"), **NO_WAIT))
    steps = [c for c in cluster.calls if c[0] == "step_clock"]
    assert steps and len(steps) % 2 == 0
    assert {abs(c[2]) for c in steps} == {600.0}
    assert set(fault_counts(events)) >= {"clock/forward", "clock/back"}
    assert cluster.healthy
    with pytest.raises(ValueError):
        pick_fault(random.Random(0), [1, 2, 3], ("clock",), proxied=True, addressed=True)


def test_a_cluster_with_faulty_disks_gets_disk_faults_each_repaired() -> None:
    cluster = FakeCluster(disked=True)
    events = run_chaos(cluster, ChaosPlan(40, 30, 5, faults=("disk", "pause"), **NO_WAIT))
    failed = [c[1] for c in cluster.calls if c[0] == "fail_disk"]
    assert failed and failed == [c[1] for c in cluster.calls if c[0] == "repair_disk"]
    assert fault_counts(events)["disk"] == len(failed)
    assert cluster.healthy
    with pytest.raises(ValueError):
        pick_fault(random.Random(0), [1, 2, 3], ("disk",), proxied=True, addressed=True)


def test_a_target_aims_one_node_faults() -> None:
    """The transaction chaos test kills the coordinator's node and partition leaders: the
    target chooses, at injection time, among the nodes it is handed."""
    aims = iter([3, 1, 3, 2])
    events = run_chaos(FakeCluster(), ChaosPlan(4, 30, 5, faults=("kill",), **NO_WAIT),
                       target=lambda rng: next(aims))
    assert [e.fault.nodes for e in events if e.action == "inject"] == [(3,), (1,), (3,), (2,)]
