"""The rebalance state machine against a simulated cluster: resumable from status at every
pass, never submitting a partition twice, bounded batches, counters, failures, replans."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from rillet_operator import rebalance as rb


@dataclass
class FakeCluster:
    """Moves finish after `delay[key]` passes; every submission is recorded."""
    assignment: dict
    sizes: dict
    live: set
    delay: dict = field(default_factory=dict)
    moving: dict = field(default_factory=dict)     # key -> [target, passes left]
    submissions: list = field(default_factory=list)

    def observe(self) -> rb.Observed:
        union = dict(self.assignment)
        for k, (target, _) in self.moving.items():
            union[k] = tuple(dict.fromkeys(list(self.assignment[k]) + list(target)))
        return rb.Observed(union, {k: t for k, (t, _) in self.moving.items()}, dict(union),
                           self.sizes, frozenset(self.live))

    def apply(self, actions: rb.Actions) -> None:
        for k in actions.cancel:
            self.moving.pop(k, None)
        for k, target in actions.submit.items():
            self.submissions.append(k)
            self.moving[k] = [target, self.delay.get(k, 1)]

    def tick(self) -> None:
        for k in list(self.moving):
            self.moving[k][1] -= 1
            if self.moving[k][1] <= 0 and set(self.moving[k][0]) <= self.live:
                self.assignment[k] = self.moving.pop(k)[0]


def _plan(n: int):
    before = {("t", p): (0, 1, 2) for p in range(n)}
    plan = {("t", p): (3, 1, 2) if p % 2 else (0, 4, 2) for p in range(n)}
    plan[("t", 0)] = (1, 0, 2)    # a reorder: no bytes
    return before, plan


def _run(cluster, state, batch, restart_every=1, max_passes=500, hook=None):
    for i in range(max_passes):
        if restart_every and i % restart_every == 0:   # the operator restarts: status only
            state = rb.RebalanceState.from_status(json.loads(json.dumps(state.to_status())))
        state, actions = rb.step(state, cluster.observe(), batch_size=batch, now=f"t{i}")
        in_flight = set(state.submitted) - set(state.done)
        assert len(in_flight) <= batch
        cluster.apply(actions)
        if hook:
            hook(i, cluster, state)
        if state.phase not in rb.ACTIVE:
            return state
        cluster.tick()
    raise AssertionError(f"no end after {max_passes} passes: {state}")


def test_status_round_trip_is_exact():
    before, plan = _plan(5)
    c = FakeCluster(dict(before), {k: 100 for k in before}, {0, 1, 2, 3, 4})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    state, _ = rb.step(state, c.observe(), batch_size=2, now="t1")
    again = rb.RebalanceState.from_status(json.loads(json.dumps(state.to_status())))
    assert again == state and again.to_status() == state.to_status()
    assert rb.RebalanceState.from_status(None).phase == "Idle"


def test_a_move_to_the_end_with_restarts_at_every_pass():
    before, plan = _plan(9)
    c = FakeCluster(dict(before), {k: 1000 for k in before}, {0, 1, 2, 3, 4},
                    delay={("t", p): 1 + p % 3 for p in range(9)})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    assert state.phase == "Planned" and state.total == 9 and state.bytes_total == 8000
    first, actions = rb.step(state, c.observe(), batch_size=3, now="t1")
    assert actions.throttle and len(actions.submit) == 3
    c.apply(actions)
    c.tick()
    end = _run(c, first, 3)
    assert end.phase == "Done" and end.finished_at
    assert sorted(c.submissions) == sorted(plan), "every partition submitted exactly once"
    assert len(end.done) == 9 and end.bytes_moved == 8000 and not end.diverged
    assert c.assignment == {**before, **plan}
    assert "done: 9 partitions" in rb.progress(end)


def test_the_last_step_clears_the_throttle():
    before, plan = _plan(2)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3, 4})
    state = rb.start("rebalance", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    cleared = []
    _run(c, state, 5, hook=lambda i, cl, s: None)
    state = rb.start("rebalance", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    state, actions = rb.step(state, c.observe(), batch_size=5, now="t")
    cleared.append(actions.clear_throttle)
    assert state.phase == "Done" and cleared == [True], "already at the plan: done at once"


def test_an_empty_plan_is_done_at_once():
    c = FakeCluster({("t", 0): (0,)}, {}, {0})
    state = rb.start("rebalance", [0], {}, c.observe(), "t0")
    assert state.phase == "Done" and state.total == 0
    assert rb.step(state, c.observe(), batch_size=1, now="t1")[1] == rb.Actions()


def test_killed_between_submit_and_the_cluster_showing_it_never_resubmits():
    """The submission is recorded in the same status write as the state, so a restart after
    the request but before the cluster lists the move does not send it again."""
    before, plan = _plan(4)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3, 4})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    state, actions = rb.step(state, c.observe(), batch_size=4, now="t1")
    saved = json.loads(json.dumps(state.to_status()))
    c.apply(actions)   # accepted by the cluster; the operator dies before the next pass
    restarted = rb.RebalanceState.from_status(saved)
    restarted, again = rb.step(restarted, c.observe(), batch_size=4, now="t2")
    assert again.submit == {}
    end = _run(c, restarted, 4)
    assert end.phase == "Done" and sorted(c.submissions) == sorted(plan)


def test_a_move_that_ends_elsewhere_counts_as_diverged_not_resubmitted():
    before, plan = _plan(3)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3, 4})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")

    def someone_else_cancels(i, cluster, s):
        if ("t", 1) in cluster.moving:
            cluster.moving.pop(("t", 1))

    end = _run(c, state, 3, hook=someone_else_cancels)
    assert end.phase == "Done" and end.diverged == ["t/1"]
    assert c.submissions.count(("t", 1)) == 1
    assert "1 ended elsewhere" in rb.progress(end)


def test_a_dead_target_broker_holds_its_moves_then_fails_the_rebalance():
    before, plan = _plan(4)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3})     # broker 4 is down
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    end = _run(c, state, 4, max_passes=rb.BROKER_DOWN_STEPS + 5)
    assert end.phase == "Failed" and "broker 4" in end.reason
    assert not any(4 in plan[k] for k in c.submissions), "nothing sent that needs broker 4"


def test_a_broker_back_within_the_grace_lets_the_move_finish():
    before, plan = _plan(4)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3})

    def comes_back(i, cluster, s):
        if i == 5:
            cluster.live.add(4)

    end = _run(c, rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0"), 4,
               hook=comes_back)
    assert end.phase == "Done" and end.broker_down_steps == 0


def test_replan_keeps_fitting_moves_and_cancels_the_others():
    before, plan = _plan(6)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3, 4}, delay={k: 50 for k in before})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    state, actions = rb.step(state, c.observe(), batch_size=3, now="t1")
    c.apply(actions)
    # The spec now wants brokers 0-3: the move onto 4 is cancelled, the one onto 3 kept.
    new_plan = {("t", p): (3, 1, 2) for p in range(1, 6)}
    fresh, cancel = rb.replan(state, [0, 1, 2, 3], new_plan, c.observe(), "t2")
    assert set(cancel) == {("t", 2)}
    c.apply(rb.Actions(cancel=cancel))
    assert "t/1" in fresh.submitted and fresh.plan["t/1"] == [3, 1, 2]
    assert fresh.target_brokers == [0, 1, 2, 3] and fresh.started_at == "t0"
    c.delay = {}
    end = _run(c, fresh, 3)
    assert end.phase == "Done"
    assert c.submissions.count(("t", 1)) == 1
    assert all(4 not in c.assignment[k] for k in c.assignment)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=8, max_size=8), st.integers(1, 5),
       st.integers(1, 4))
def test_any_completion_schedule_and_restart_rhythm_ends_done_with_one_submit_each(
        delays, batch, restart_every):
    before, plan = _plan(8)
    c = FakeCluster(dict(before), {k: 10 for k in before}, {0, 1, 2, 3, 4},
                    delay={("t", p): d for p, d in enumerate(delays)})
    end = _run(c, rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0"), batch,
               restart_every=restart_every)
    assert end.phase == "Done" and not end.diverged
    assert sorted(c.submissions) == sorted(plan)
    assert end.bytes_moved == end.bytes_total == 70


def test_a_stale_status_does_not_resubmit_a_move_in_flight():
    """A pass that reads the status from before the previous pass's write sees the move in
    the cluster's ongoing list and records it instead of sending it again."""
    before, plan = _plan(3)
    c = FakeCluster(dict(before), {}, {0, 1, 2, 3, 4}, delay={k: 5 for k in before})
    state = rb.start("scale-up", [0, 1, 2, 3, 4], plan, c.observe(), "t0")
    stale = json.loads(json.dumps(state.to_status()))
    state, actions = rb.step(state, c.observe(), batch_size=3, now="t1")
    c.apply(actions)
    again, more = rb.step(rb.RebalanceState.from_status(stale), c.observe(), batch_size=3,
                          now="t2")
    assert set(more.submit).isdisjoint(actions.submit)
    assert set(actions.submit) <= {rb.parse_key(k) for k in again.submitted}


def test_status_holds_a_summary_and_the_config_map_the_whole_state():
    """Issue 32: status.rebalance was ~3,500 characters (the whole plan, copies, lists)."""
    plan = {(f"t{i}", p): (0, 1, 3) for i in range(20) for p in range(10)}
    obs = FakeCluster({k: (0, 1, 2) for k in plan}, {k: 100 for k in plan}, {0, 1, 2, 3}
                      ).observe()
    state = rb.start("scale-up", [0, 1, 2, 3], plan, obs, "T0", 200, 200)
    state, actions = rb.step(state, obs, batch_size=10, now="T1")
    summary = rb.summary(state, "c-rebalance")
    assert summary["phase"] == "Moving" and summary["total"] == 200
    assert summary["partitionsMoving"] == 10 and summary["partitionsDone"] == 0
    assert sorted(summary["currentBatch"]) == sorted(rb.key_str(k)
                                                     for k in actions.submit)
    assert summary["planConfigMap"] == "c-rebalance" and "plan" not in summary
    assert len(json.dumps(summary)) < 1000 < len(json.dumps(state.to_status()))
    cm = rb.plan_config_map(state, "c-rebalance", "ns", {"a": "b"})
    assert rb.load(cm, summary).to_status() == state.to_status()


def test_a_state_kept_in_status_by_an_older_operator_still_loads():
    obs = FakeCluster({("t", 0): (0, 1)}, {("t", 0): 10}, {0, 1, 2}).observe()
    state = rb.start("rebalance", [0, 1, 2], {("t", 0): (0, 2)}, obs, "T0")
    assert rb.load(None, state.to_status()).to_status() == state.to_status()


def test_a_summary_without_its_config_map_never_resubmits():
    obs = FakeCluster({("t", 0): (0, 1)}, {("t", 0): 10}, {0, 1, 2}).observe()
    state = rb.start("rebalance", [0, 1, 2], {("t", 0): (0, 2)}, obs, "T0")
    state, _ = rb.step(state, obs, batch_size=5, now="T1")
    lost = rb.load(None, rb.summary(state))
    assert lost.phase == "Failed" and "ConfigMap" in lost.reason
    assert rb.step(lost, obs, batch_size=5, now="T2")[1].submit == {}
