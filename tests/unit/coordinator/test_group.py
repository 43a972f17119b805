"""The classic group protocol state machine, driven with a fake clock (no sockets)."""
from __future__ import annotations

from typing import Any

import pytest

from rillet.coordinator.group import Group
from rillet.coordinator.group_types import (GroupConfig, GroupState, JoinRequest, JoinResult,
                                            SyncResult)
from rillet.protocol import errors

SESSION = 10_000
REBALANCE = 30_000


class Box:
    """Collects what a callback was given."""

    def __init__(self) -> None:
        self.value: Any = None

    def __call__(self, value: Any) -> None:
        assert self.value is None, "callback completed twice"
        self.value = value


def req(member_id: str = "", instance: str | None = None, protocols: Any = None,
        require_known: bool = True, client: str = "c") -> JoinRequest:
    return JoinRequest(member_id, instance, client, "/127.0.0.1", SESSION, REBALANCE, "consumer",
                       protocols or [("range", b"m-" + client.encode())], require_known)


def make(delay: int = 0) -> tuple[Group, list[Group]]:
    persisted: list[Group] = []
    g = Group("g", GroupConfig(initial_rebalance_delay_ms=delay), 0, persisted.append)
    return g, persisted


def join_new(g: Group, now: int, **kw: Any) -> Box:
    """First join (MEMBER_ID_REQUIRED) then the real join; returns the pending join box."""
    first = Box()
    g.join(req(**kw), now, first)
    assert first.value.error == errors.MemberIdRequired.code
    box = Box()
    g.join(req(member_id=first.value.member_id, **kw), now, box)
    if box.value is None:
        box.member_id = first.value.member_id  # type: ignore[attr-defined]
    return box


def sync_all(g: Group, now: int, results: list[JoinResult]) -> dict[str, SyncResult]:
    leader = next(r for r in results if r.member_id == r.leader)
    boxes = {}
    for r in results:
        if r is leader:
            continue
        boxes[r.member_id] = Box()
        g.sync(r.member_id, None, r.generation_id, None, None, {}, now, boxes[r.member_id])
    assignments = {m: f"a-{m}".encode() for m, _, _ in leader.members}
    boxes[leader.member_id] = Box()
    g.sync(leader.member_id, None, leader.generation_id, "consumer", "range", assignments, now,
           boxes[leader.member_id])
    return {m: b.value for m, b in boxes.items()}


def stable_pair() -> tuple[Group, JoinResult, JoinResult]:
    """A Stable group of two members, "a" and "b"; their join results (generation 2)."""
    g, _ = make()
    a = join_new(g, 0, client="a").value
    b_box = join_new(g, 0, client="b")
    a_box = Box()
    g.join(req(member_id=a.member_id, client="a"), 0, a_box)
    sync_all(g, 0, [a_box.value, b_box.value])
    return g, a_box.value, b_box.value


def test_first_member_gets_member_id_required_then_leads_generation_1() -> None:
    g, persisted = make()
    box = join_new(g, 0, client="a")
    r = box.value
    assert r.error == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and [m[0] for m in r.members] == [r.member_id]
    assert g.state == GroupState.COMPLETING_REBALANCE and not persisted
    out = sync_all(g, 1, [r])
    assert persisted  # stored with the assignments
    assert out[r.member_id].assignment == f"a-{r.member_id}".encode()
    assert g.state == GroupState.STABLE


def test_second_member_triggers_rebalance_and_both_get_assignments() -> None:
    g, _ = make()
    a = join_new(g, 0, client="a").value
    sync_all(g, 0, [a])
    b_box = join_new(g, 100, client="b")
    assert b_box.value is None and g.state == GroupState.PREPARING_REBALANCE
    assert g.heartbeat(a.member_id, None, 1, 200) == errors.RebalanceInProgress.code
    a_box = Box()
    g.join(req(member_id=a.member_id, client="a"), 300, a_box)
    a2, b2 = a_box.value, b_box.value
    assert a2.generation_id == b2.generation_id == 2
    assert a2.leader == a.member_id and len(a2.members) == 2 and b2.members == ()
    out = sync_all(g, 400, [a2, b2])
    assert {k: v.assignment for k, v in out.items()} == {
        a.member_id: f"a-{a.member_id}".encode(), b2.member_id: f"a-{b2.member_id}".encode()}
    assert g.heartbeat(b2.member_id, None, 2, 500) == 0
    assert g.heartbeat(b2.member_id, None, 1, 500) == errors.IllegalGeneration.code
    assert g.heartbeat("nobody", None, 2, 500) == errors.UnknownMemberId.code


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout() -> None:
    g, _ = make()
    a = join_new(g, 0, client="a").value
    sync_all(g, 0, [a])
    b_box = join_new(g, 100, client="b")
    for t in range(5000, REBALANCE, 5000):  # a keeps its session but never rejoins
        assert g.heartbeat(a.member_id, None, 1, t) == errors.RebalanceInProgress.code
        g.tick(t)
    g.tick(100 + REBALANCE - 1)
    assert b_box.value is None
    g.tick(100 + REBALANCE)
    assert b_box.value.error == 0 and b_box.value.generation_id == 2
    assert list(g.members) == [b_box.value.member_id]
    assert b_box.value.leader == b_box.value.member_id


def test_session_expiry_removes_member_and_rebalances() -> None:
    g, _ = make()
    a = join_new(g, 0, client="a").value
    b_box = join_new(g, 0, client="b")
    a_box = Box()
    g.join(req(member_id=a.member_id, client="a"), 0, a_box)
    out = sync_all(g, 0, [a_box.value, b_box.value])
    assert len(out) == 2 and g.state == GroupState.STABLE
    for t in range(1000, SESSION + 2000, 1000):  # only a heartbeats
        assert g.heartbeat(a.member_id, None, 2, t) in (0, errors.RebalanceInProgress.code)
        g.tick(t)
    assert b_box.value.member_id not in g.members
    assert g.state == GroupState.PREPARING_REBALANCE
    a3 = Box()
    g.join(req(member_id=a.member_id, client="a"), SESSION + 2500, a3)
    assert a3.value.generation_id == 3 and [m[0] for m in a3.value.members] == [a.member_id]


def test_leave_rebalances_and_last_leave_empties_group() -> None:
    g, persisted = make()
    a = join_new(g, 0, client="a").value
    sync_all(g, 0, [a])
    assert g.leave(a.member_id, None, 10) == 0
    assert g.state == GroupState.EMPTY and g.generation_id == 2 and not g.members
    assert g.leave(a.member_id, None, 11) == errors.UnknownMemberId.code


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    g, _ = make()
    first = Box()
    g.join(req(instance="i-1", client="a"), 0, first)  # static members skip MEMBER_ID_REQUIRED
    r = first.value
    assert r.error == 0 and r.generation_id == 1
    sync_all(g, 0, [r])
    restarted = Box()
    g.join(req(instance="i-1", client="a"), 1000, restarted)
    r2 = restarted.value
    assert r2.error == 0 and r2.generation_id == 1 and r2.member_id != r.member_id
    assert r2.leader != r2.member_id  # must not compute a new assignment
    assert g.state == GroupState.STABLE
    s = Box()
    g.sync(r2.member_id, "i-1", 1, None, None, {}, 1001, s)
    assert s.value.error == 0 and s.value.assignment == f"a-{r.member_id}".encode()
    # The old incarnation is fenced.
    assert g.heartbeat(r.member_id, "i-1", 1, 1002) == errors.FencedInstanceId.code
    with pytest.raises(errors.FencedInstanceId):
        g.validate_commit(r.member_id, "i-1", 1, 1002)


def test_commit_validation() -> None:
    g, _ = make()
    g.validate_commit("", None, -1, 0)  # empty group: admin commit allowed
    a = join_new(g, 0, client="a").value
    with pytest.raises(errors.RebalanceInProgress):
        g.validate_commit(a.member_id, None, 1, 0)
    sync_all(g, 0, [a])
    g.validate_commit(a.member_id, None, 1, 0)
    with pytest.raises(errors.IllegalGeneration):
        g.validate_commit(a.member_id, None, 0, 0)
    with pytest.raises(errors.UnknownMemberId):
        g.validate_commit("x", None, 1, 0)
    with pytest.raises(errors.UnknownMemberId):
        g.validate_commit("", None, -1, 0)


def test_protocol_selection_and_inconsistent_protocols() -> None:
    g, _ = make(delay=1000)
    a = join_new(g, 0, client="a", protocols=[("roundrobin", b"x"), ("range", b"y")])
    b = join_new(g, 10, client="b", protocols=[("range", b"z"), ("roundrobin", b"w")])
    c = join_new(g, 20, client="c", protocols=[("range", b"q")])
    bad = Box()
    g.join(req(client="d", protocols=[("sticky", b"")]), 30, bad)
    assert bad.value.error == errors.InconsistentGroupProtocol.code
    g.tick(5000)  # members kept arriving: the initial delay is extended once more
    g.tick(7000)
    for box in (a, b, c):
        assert box.value.protocol_name == "range"


def test_initial_delay_extends_while_members_keep_joining() -> None:
    g, _ = make(delay=3000)
    a = join_new(g, 0, client="a")
    g.tick(2000)
    b = join_new(g, 2500, client="b")
    g.tick(3000)  # a new member arrived: wait another delay
    assert a.value is None
    g.tick(6000)
    assert a.value.generation_id == b.value.generation_id == 1
    assert len({a.value.leader, b.value.leader}) == 1


def test_sync_waits_for_leader_and_rebalance_cancels_it() -> None:
    g, _ = make()
    a = join_new(g, 0, client="a").value
    b_box = join_new(g, 0, client="b")
    a_box = Box()
    g.join(req(member_id=a.member_id, client="a"), 0, a_box)
    follower = b_box.value if b_box.value.leader != b_box.value.member_id else a_box.value
    s = Box()
    g.sync(follower.member_id, None, follower.generation_id, None, None, {}, 1, s)
    assert s.value is None
    join_new(g, 2, client="c")  # a third member: back to PreparingRebalance
    assert s.value.error == errors.RebalanceInProgress.code


def test_pending_member_id_expires() -> None:
    g, _ = make()
    first = Box()
    g.join(req(client="a"), 0, first)
    g.tick(SESSION + 1)
    late = Box()
    g.join(req(member_id=first.value.member_id, client="a"), SESSION + 2, late)
    assert late.value.error == errors.UnknownMemberId.code


def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    g, _ = make()
    a = join_new(g, 0, client="a").value
    b_box = join_new(g, 0, client="b")
    a_box = Box()
    g.join(req(member_id=a.member_id, client="a"), 0, a_box)
    leader = a_box.value if a_box.value.leader == a_box.value.member_id else b_box.value
    follower = b_box.value if leader is a_box.value else a_box.value
    s = Box()
    g.sync(follower.member_id, None, follower.generation_id, None, None, {}, 10, s)
    for t in range(1000, REBALANCE, 1000):  # the leader heartbeats but never syncs
        g.heartbeat(leader.member_id, None, leader.generation_id, t)
        g.tick(t)
    assert s.value is None
    g.tick(REBALANCE + 1)
    assert leader.member_id not in g.members
    assert s.value.error == errors.RebalanceInProgress.code
    assert g.state == GroupState.PREPARING_REBALANCE


def test_leader_leaving_hands_leadership_to_a_remaining_member() -> None:
    g, a, b = stable_pair()
    leader = a.leader
    other = b.member_id if leader == a.member_id else a.member_id
    assert g.leave(leader, None, 10) == 0
    rejoin = Box()
    g.join(req(member_id=other, client="x"), 20, rejoin)
    assert rejoin.value.leader == other and rejoin.value.generation_id == 3


def test_static_member_leaves_by_instance_id() -> None:
    g, _ = make()
    first = Box()
    g.join(req(instance="i-9", client="a"), 0, first)
    sync_all(g, 0, [first.value])
    assert g.leave("wrong-id", "i-9", 5) == errors.FencedInstanceId.code
    assert g.leave("", "i-9", 5) == 0  # by instance id alone (KIP-345 admin removal)
    assert not g.members and g.state == GroupState.EMPTY
    assert g.leave("", "i-9", 6) == errors.UnknownMemberId.code


def test_follower_rejoin_in_stable_group_gets_current_generation() -> None:
    g, a, b = stable_pair()
    follower = b if b.leader != b.member_id else a
    again = Box()
    g.join(req(member_id=follower.member_id, client="b" if follower is b else "a"), 50, again)
    assert again.value.generation_id == follower.generation_id and g.state == GroupState.STABLE


def test_leader_rejoin_in_stable_group_starts_a_generation_and_says_why(
        caplog: pytest.LogCaptureFixture) -> None:
    # Kafka's rule: a rejoining leader may bring new metadata, so it rebalances; the
    # other members must rejoin (kafka-python 3.0.12's leader rejoins once more after a
    # poll timed out mid-join, which a consumer that stops polling never answers).
    g, a, b = stable_pair()
    leader = a if a.leader == a.member_id else b
    assert g.state == GroupState.STABLE
    caplog.set_level("INFO", logger="rillet.coordinator.group_state")
    again = Box()
    g.join(req(member_id=leader.member_id, client="a" if leader is a else "b"), 50, again)
    assert again.value is None and g.state == GroupState.PREPARING_REBALANCE
    assert f"member {leader.member_id} rejoined" in caplog.text
    assert "preparing to rebalance in state Stable, generation 2" in caplog.text
