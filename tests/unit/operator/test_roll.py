"""Rolling restart decisions: order (controller last), waits, stuck, manual rolls, resume."""
from __future__ import annotations

import json

from rillet_operator.roll import PodView, decide, lagging_voters


def pods(revs, ready=None, uids=None):
    ready = ready or {}
    uids = uids or {}
    return [PodView(f"c-broker-{i}", i, r, ready.get(i, True), False, uids.get(i, f"u{i}"))
            for i, r in enumerate(revs)]


def roll_through(revs, controller, manual=None, state=None, max_passes=50):
    """Simulates the pods: a deleted pod comes back at the new revision on the next pass."""
    uids = {i: f"u{i}" for i in range(len(revs))}
    revs = list(revs)
    deleted = []
    for t in range(max_passes):
        d = decide(pods(revs, uids=uids), "new", controller, 0, manual, state, float(t), 300)
        state = json.loads(json.dumps(d.state))   # through the status, as the operator does
        if d.delete:
            i = int(d.delete.rsplit("-", 1)[1])
            deleted.append(i)
            revs[i] = "new"
            uids[i] = f"u{i}-{t}"
        elif not d.rolling:
            return deleted, state
    raise AssertionError("roll did not end")


def test_brokers_restart_one_at_a_time_in_order_with_the_controller_last():
    deleted, state = roll_through(["old", "old", "old"], controller=0)
    assert deleted == [1, 2, 0]
    assert state["phase"] == "Done" and state["order"] == [f"c-broker-{i}" for i in (1, 2, 0)]
    assert set(state["urpBefore"].values()) == {0} and state["controllerAt"] == {
        f"c-broker-{i}": 0 for i in range(3)}


def test_nothing_to_do_when_every_pod_runs_the_update_revision():
    d = decide(pods(["new"] * 3), "new", 0, 0, None, None, 0.0, 300)
    assert d.delete is None and not d.rolling


def test_waits_for_a_pod_not_ready_and_for_under_replicated_partitions():
    d = decide(pods(["old", "new", "new"], ready={2: False}), "new", 1, 0, None, None, 0, 300)
    assert d.delete is None and "c-broker-2" in d.waiting and d.rolling
    d = decide(pods(["old", "new", "new"]), "new", 1, 4, None, None, 0, 300)
    assert d.delete is None and "4 under-replicated" in d.waiting
    d = decide(pods(["old", "new", "new"]), "new", 1, 0, None, None, 0, 300)
    assert d.delete == "c-broker-0"


def test_waits_for_a_controller_voter_behind_the_metadata_log():
    # broker 2 came back with an empty disk and is still fetching the metadata log.
    lagging = lagging_voters({0: 120, 1: 120, 2: 40}, high_watermark=120)
    assert lagging == [2]
    d = decide(pods(["new", "old", "new"]), "new", 0, 0, None, None, 0, 300, lagging)
    assert d.delete is None and d.rolling and "voter(s) 2" in d.waiting
    caught_up = lagging_voters({0: 130, 1: 130, 2: 130}, high_watermark=130)
    d = decide(pods(["new", "old", "new"]), "new", 0, 0, None, None, 0, 300, caught_up)
    assert d.delete == "c-broker-1"


def test_a_pod_that_does_not_come_back_makes_the_roll_stuck_until_it_does():
    d = decide(pods(["old", "old"]), "new", 0, 0, None, None, 0.0, 60)
    assert d.delete == "c-broker-1"
    same_pod_still_old = pods(["old", "new"], ready={1: False}, uids={1: "u1-new"})
    d2 = decide(same_pod_still_old, "new", 0, 0, None, d.state, 30.0, 60)
    assert not d2.stuck and d2.delete is None
    d3 = decide(same_pod_still_old, "new", 0, 0, None, d2.state, 61.0, 60)
    assert d3.stuck and d3.state["phase"] == "Stuck" and "c-broker-1" in d3.state["reason"]
    back = pods(["old", "new"], uids={1: "u1-new"})
    d4 = decide(back, "new", 0, 0, None, d3.state, 90.0, 60)
    assert d4.delete == "c-broker-0" and not d4.stuck


def test_a_manual_roll_restarts_every_broker_once_per_token():
    deleted, state = roll_through(["new"] * 3, controller=2, manual="2026-11-24T10:00")
    assert deleted == [0, 1, 2]
    again, _ = roll_through(["new"] * 3, controller=2, manual="2026-11-24T10:00", state=state)
    assert again == [], "the same token does not roll twice"
    third, _ = roll_through(["new"] * 3, controller=2, manual="later", state=state)
    assert third == [0, 1, 2]


def test_a_spec_change_mid_roll_restarts_already_rolled_pods_again():
    d = decide(pods(["r1", "r1", "r1"]), "r2", 2, 0, None, None, 0.0, 300)
    assert d.delete == "c-broker-0"
    # broker 0 came back at r2; meanwhile the spec changed again (r3)
    back = pods(["r2", "r1", "r1"], uids={0: "u0-b"})
    d = decide(back, "r3", 2, 0, None, d.state, 1.0, 300)
    assert d.delete == "c-broker-0", "the pod already restarted is at an old revision again"
