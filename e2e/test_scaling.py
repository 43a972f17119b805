"""Scaling a Cluster on a real API server, with a real client producing acks=all idempotent
records all through (a Job) and reading them back at the end: 3 -> 5 (data and leaders move
onto the new brokers), 5 -> 3 with the operator pod killed in the middle of the drain, an
unsafe 3 -> 2 refused, a config change rolling the brokers one at a time.

One Cluster serves the module; the tests run in file order and build on each other's state.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Iterator

import pytest

from localk8s.kube import Kube
from localk8s.testing import restricted_namespace
from test_operator import (ZONE, _cr_path, _debug, columns, condition, delete_namespace,
                           events, get_cr, job_result, kubectl, operator, patch_cr, run_job,
                           start_job, wait_event)  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(1200)

CLUSTER = "scaled"
BOOTSTRAP = f"{CLUSTER}-bootstrap:9092"
STREAM = "stream"           # produced to all through the module
BULK = "bulk"               # data for the moves to carry
BULK_RECORDS, BULK_SIZE = 40_000, 1024
MOVE_TIMEOUT_S = 900
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def scaled(k8s, operator) -> Iterator[dict]:  # noqa: F811
    """A 3-broker zone-aware Cluster with two Topics, bulk data, and the stream Job running."""
    kube = k8s.kube
    ns = f"e2e-scale-{uuid.uuid4().hex[:5]}"
    kube.create(restricted_namespace(ns))
    kube.request("POST", _cr_path(ns, "clusters"), {
        "apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": ns},
        "spec": {"replicas": 3, "rack": {"topologyKey": ZONE},
                 "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
                 "config": {"min.insync.replicas": 2},
                 "rebalance": {"throttleBytesPerSecond": 1024 * 1024, "batchSize": 3}}})
    try:
        out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready",
                      f"cluster.rillet.io/{CLUSTER}", "-n", ns, "--timeout=420s", timeout=450)
        if out.returncode != 0:
            pytest.fail(f"Cluster not Ready: {out.stderr}\n{_debug(kube, ns)}")
        for topic, partitions in ((STREAM, 6), (BULK, 8)):
            kube.request("POST", _cr_path(ns, "topics"), {
                "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
                "metadata": {"name": topic, "namespace": ns},
                "spec": {"cluster": CLUSTER, "partitions": partitions, "replicas": 3}})
            out = kubectl(k8s.kubeconfig, "wait", "--for=condition=Ready",
                          f"topic.rillet.io/{topic}", "-n", ns, "--timeout=120s", timeout=150)
            assert out.returncode == 0, out.stderr
        filled = run_job(kube, ns, ["fill", BOOTSTRAP, BULK, str(BULK_RECORDS),
                                    str(BULK_SIZE)], timeout=600)
        stream_job = start_job(kube, ns, ["stream", BOOTSTRAP, STREAM, "40", "2400"])
        yield {"ns": ns, "stream_job": stream_job, "filled": filled}
    finally:
        print(f"\nscaling timings (s): {TIMINGS}")
        delete_namespace(kube, ns)


def _cluster(kube: Kube, ns: str) -> dict:
    return get_cr(kube, ns, "clusters", CLUSTER) or {}


def _settled(kube: Kube, ns: str, replicas: int) -> dict | None:
    c = _cluster(kube, ns)
    st = c.get("status") or {}
    ok = (condition(c).get("status") == "True"
          and st.get("observedGeneration") == c["metadata"]["generation"]
          and (st.get("scaling") or {}).get("phase") in (None, "Done")
          and (st.get("rebalance") or {}).get("phase") in (None, "Done", "Idle")
          and st.get("readyBrokers") == replicas)
    return c if ok else None


def _layout(kube: Kube, ns: str, topic: str) -> dict:
    return run_job(kube, ns, ["inspect", BOOTSTRAP, topic, "--full-isr", "120"])


def _plans(seen: list[dict]) -> list[tuple]:
    """Each plan the snapshots show, once: (goal, started, partitions, replica moves, last
    phase seen, partitions done, diverged)."""
    plans: dict[str, tuple] = {}
    for rb in seen:
        plans[rb.get("startedAt", "")] = (rb.get("goal"), rb.get("startedAt"), rb.get("total"),
                                          rb.get("replicaMoves"), rb.get("phase"),
                                          rb.get("partitionsDone"), rb.get("partitionsDiverged"))
    return list(plans.values())


def _plan_state(kube: Kube, ns: str) -> dict:
    """The rebalance's whole state, kept in its ConfigMap (status.rebalance is a summary)."""
    cm = kube.get("ConfigMap", f"{CLUSTER}-rebalance", ns)
    return json.loads(cm["data"]["state.json"])


def _watch_rebalance(kube: Kube, ns: str, replicas: int, on_moving=None,
                     ready_seen: list | None = None) -> list[dict]:
    """Polls status.rebalance until the cluster settles at `replicas`; the snapshots seen.
    `ready_seen` collects (Ready status, Ready reason, Scaling status) of every poll."""
    seen: list[dict] = []
    deadline = time.monotonic() + MOVE_TIMEOUT_S
    while time.monotonic() < deadline:
        c = _cluster(kube, ns)
        if ready_seen is not None:
            ready_seen.append((condition(c).get("status"), condition(c).get("reason"),
                               condition(c, "Scaling").get("status")))
        rb = (c.get("status") or {}).get("rebalance")
        if rb and (not seen or rb != seen[-1]):
            seen.append(rb)
            if on_moving and rb.get("phase") == "Moving":
                on_moving(rb)
        if _settled(kube, ns, replicas):
            return seen
        time.sleep(1)
    pytest.fail(f"not settled at {replicas} brokers: {(_cluster(kube, ns).get('status'))}\n"
                f"{_debug(kube, ns)}")


def test_scale_up_3_to_5_moves_replicas_and_leaders_onto_the_new_brokers(k8s, scaled):
    kube, ns = k8s.kube, scaled["ns"]
    t0 = time.monotonic()
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"replicas": 5}})
    printed: list[dict] = []
    ready_seen: list[tuple] = []

    def print_columns(rb: dict) -> None:
        if not printed:
            printed.append(columns(k8s.kubeconfig, ns, "rlc", CLUSTER))
    seen = _watch_rebalance(kube, ns, 5, on_moving=print_columns, ready_seen=ready_seen)
    TIMINGS["3->5"] = round(time.monotonic() - t0)
    # Issue 32: a planned scale-up read Ready=False for 52 s though the cluster served; Ready
    # stays True, with Scaling beside it and the change as its reason.
    assert all(ready == "True" for ready, _, _ in ready_seen), sorted(set(ready_seen))
    assert ("True", "ScalingUp", "True") in ready_seen, sorted(set(ready_seen))
    assert printed and printed[0]["READY"] == "True" and printed[0]["REASON"] == "ScalingUp" \
        and printed[0]["DESIRED"] == printed[0]["BROKERS"] == "5", printed
    # ... and the user's own scale is told as such, not as drift repaired.
    assert wait_event(kube, ns, CLUSTER, "ScaleUp")["message"] == "3 -> 5 brokers"
    assert not [e for e in events(kube, ns, CLUSTER) if e["reason"] == "Corrected"]
    final = (_cluster(kube, ns)["status"]).get("rebalance") or {}
    assert final.get("phase") == "Done" and final.get("goal") == "scale-up", final
    assert any(s.get("phase") == "Moving" for s in seen), "progress was visible in status"
    assert any(s.get("currentBatch") for s in seen), "the batch in flight was visible"
    assert final["total"] > 0 and final["partitionsDone"] == final["total"]
    # status.rebalance is a summary (it held the whole plan: ~3,500 characters); the plan
    # and the lists are in the ConfigMap it names.
    assert "plan" not in final and len(json.dumps(final)) < 1500, final
    assert final["planConfigMap"] == f"{CLUSTER}-rebalance"
    state = _plan_state(kube, ns)
    assert len(state["done"]) == state["total"] == final["total"] and state["plan"]
    assert len(set(state["submitted"])) == len(state["submitted"]), "no move issued twice"
    assert final["bytesMoved"] > 0
    TIMINGS["3->5 partitions changed"] = final["total"]
    TIMINGS["3->5 replica moves / minimum"] = (final["replicaMoves"],
                                                          final["minimumMoves"])
    # Every topic has one replica per zone: moves stay in their zone, and the plan makes
    # exactly the zone-by-zone minimum.
    assert final["replicaMoves"] == final["minimumMoves"] > 0
    holds = {b: 0 for b in range(5)}
    leads = {b: 0 for b in range(5)}
    for topic in (BULK, STREAM):
        layout = _layout(kube, ns, topic)
        assert layout["full_isr"], layout
        for info in layout["partitions"].values():
            assert len(info["replicas"]) == 3
            assert len({layout["brokers"][str(r)] for r in info["replicas"]}) == 3, info
            for r in info["replicas"]:
                holds[r] += 1
            leads[info["leader"]] += 1
    assert holds[3] > 0 and holds[4] > 0, holds
    assert leads[3] > 0 and leads[4] > 0, leads
    # Five brokers over three zones: one zone has a single broker, which with RF 3 over
    # three zones holds every partition; the others share the rest.
    racks = {int(b): r for b, r in layout["brokers"].items()}
    alone = [b for b in racks if list(racks.values()).count(racks[b]) == 1]
    assert len(alone) == 1 and holds[alone[0]] == sum(holds.values()) // 3, (holds, racks)


def test_a_rebalance_request_is_taken_once_and_leaves_a_balanced_cluster_alone(k8s, scaled):
    """The rillet.io/rebalance annotation asks for one rebalance without scaling; right after
    3 -> 5 the layout is balanced already, so the plan moves nothing."""
    kube, ns = k8s.kube, scaled["ns"]
    before = _layout(kube, ns, BULK)["partitions"]
    out = kubectl(k8s.kubeconfig, "annotate", "--overwrite", f"cluster.rillet.io/{CLUSTER}",
                  "-n", ns, "rillet.io/rebalance=e2e-1")
    assert out.returncode == 0, out.stderr

    def taken() -> dict | None:
        st = _cluster(kube, ns).get("status") or {}
        reb = st.get("rebalance") or {}
        return reb if (st.get("rebalanceToken") == "e2e-1" and reb.get("goal") == "rebalance"
                       and reb.get("phase") == "Done") else None
    final = kube.wait_for("the rebalance request done", taken, timeout=180)
    assert final["total"] == 0 and final["replicaMoves"] == 0 and final["currentBatch"] == [], \
        final
    assert _plan_state(kube, ns)["submitted"] == []
    assert _settled(kube, ns, 5) is not None
    after = _layout(kube, ns, BULK)["partitions"]
    assert {p: i["replicas"] for p, i in after.items()} == \
        {p: i["replicas"] for p, i in before.items()}


def test_scale_down_5_to_3_drains_first_with_the_operator_killed_mid_move(k8s, scaled, operator):  # noqa: F811
    kube, ns = k8s.kube, scaled["ns"]
    op_ns, release = operator
    killed: list[str] = []

    def kill_operator(rb: dict) -> None:
        if killed or not rb.get("partitionsMoving") or rb["partitionsDone"] >= rb["total"]:
            return   # once, while moves are in flight
        for pod in kube.list("Pod", op_ns, labelSelector=f"app.kubernetes.io/instance={release}"):
            kube.delete("Pod", pod["metadata"]["name"], op_ns)
            killed.append(pod["metadata"]["name"])

    t0 = time.monotonic()
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"replicas": 3}})
    # While draining, the two highest brokers still run.
    kube.wait_for("draining", lambda: ((_cluster(kube, ns)["status"].get("scaling") or {})
                                       .get("phase") == "Draining"), timeout=120)
    assert kube.get("StatefulSet", f"{CLUSTER}-broker", ns)["spec"]["replicas"] == 5
    seen = _watch_rebalance(kube, ns, 3, on_moving=kill_operator)
    TIMINGS["5->3"] = round(time.monotonic() - t0)
    TIMINGS["5->3 plans"] = _plans(seen)
    assert killed, "the operator pod was killed mid-move"
    final = _cluster(kube, ns)["status"]["rebalance"]
    assert final["goal"] == "scale-down" and final["phase"] == "Done"
    state = _plan_state(kube, ns)
    assert state["goal"] == "scale-down" and state["startedAt"] == final["startedAt"]
    assert len(set(state["submitted"])) == len(state["submitted"]), "no move issued twice"
    TIMINGS["5->3 partitions changed"] = final["total"]
    TIMINGS["5->3 replica moves / minimum"] = (final["replicaMoves"], final["minimumMoves"])
    assert final["replicaMoves"] == final["minimumMoves"] > 0
    assert kube.get("StatefulSet", f"{CLUSTER}-broker", ns)["spec"]["replicas"] == 3
    for b in (3, 4):
        assert kube.get_or_none("Pod", f"{CLUSTER}-broker-{b}", ns) is None
        kube.wait_for(f"claim of broker {b} deleted", lambda b=b: kube.get_or_none(
            "PersistentVolumeClaim", f"data-{CLUSTER}-broker-{b}", ns) is None, timeout=60)
    for topic in (BULK, STREAM):
        layout = _layout(kube, ns, topic)
        assert layout["full_isr"], layout
        assert sorted(int(b) for b in layout["brokers"]) == [0, 1, 2], "3 and 4 unregistered"
        for info in layout["partitions"].values():
            assert sorted(info["replicas"]) == [0, 1, 2], info
    bulk = run_job(kube, ns, ["count", BOOTSTRAP, BULK], timeout=300)
    assert bulk["records"] == BULK_RECORDS == bulk["end_offsets"]


def test_unsafe_scale_down_3_to_2_is_refused_and_changes_nothing(k8s, scaled):
    """RF=3 topics on two brokers cannot be: refused (ScaleDownUnsafe), nothing moves."""
    kube, ns = k8s.kube, scaled["ns"]
    before = _layout(kube, ns, BULK)["partitions"]
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"replicas": 2}})
    cond = kube.wait_for("ScaleDownUnsafe", lambda: (lambda c: c if c.get("reason") ==
                         "ScaleDownUnsafe" else None)(condition(_cluster(kube, ns))),
                         timeout=120)
    assert cond["status"] == "False" and "replication factor 3" in cond["message"], cond
    # Issue 32: a refusal is a Warning Event, and REASON shows without -o wide.
    assert wait_event(kube, ns, CLUSTER, "ScaleDownUnsafe")["type"] == "Warning"
    shown = columns(k8s.kubeconfig, ns, "rlc", CLUSTER)
    assert (shown["DESIRED"], shown["BROKERS"], shown["READY"], shown["REASON"]) == (
        "2", "3", "False", "ScaleDownUnsafe"), shown
    assert kube.get("StatefulSet", f"{CLUSTER}-broker", ns)["spec"]["replicas"] == 3
    assert (_cluster(kube, ns)["status"].get("rebalance") or {}).get("goal") == "scale-down"
    after = _layout(kube, ns, BULK)
    assert {p: i["replicas"] for p, i in after["partitions"].items()} == \
        {p: i["replicas"] for p, i in before.items()} and after["full_isr"], after
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"replicas": 3}})
    kube.wait_for("Ready at 3 again", lambda: _settled(kube, ns, 3), timeout=120)


def _uids(kube: Kube, ns: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"]
            for p in kube.list("Pod", ns, labelSelector=f"rillet.io/cluster={CLUSTER}")}


def test_a_dynamic_config_change_is_applied_without_restarts(k8s, scaled):
    kube, ns = k8s.kube, scaled["ns"]
    before = _uids(kube, ns)
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"config": {"log.retention.ms": 7200000}}})
    kube.wait_for("applied", lambda: run_job(kube, ns, ["broker-config", BOOTSTRAP, "1",
                  "log.retention.ms"])["entry"]["value"] == "7200000", timeout=120, interval=5)
    kube.wait_for("settled", lambda: _settled(kube, ns, 3), timeout=60)
    assert _uids(kube, ns) == before, "no broker restarted"


def test_a_static_config_change_rolls_the_brokers_one_by_one_controller_last(k8s, scaled):
    kube, ns = k8s.kube, scaled["ns"]
    before = _uids(kube, ns)
    t0 = time.monotonic()
    patch_cr(kube, ns, "clusters", CLUSTER, {"spec": {"config": {"num.replica.fetchers": 2}}})
    restarted: list[str] = []
    ready_seen: set[tuple] = set()
    deadline = time.monotonic() + MOVE_TIMEOUT_S
    while time.monotonic() < deadline:
        now = _uids(kube, ns)
        for pod, uid in now.items():
            if pod not in restarted and before.get(pod) != uid:
                restarted.append(pod)
        c = _cluster(kube, ns)
        ready_seen.add((condition(c).get("status"), condition(c, "RollingRestart").get("status")))
        roll = (c.get("status") or {}).get("roll") or {}
        if roll.get("phase") == "Done" and len(restarted) == 3 and _settled(kube, ns, 3):
            break
        time.sleep(1)
    else:
        pytest.fail(f"roll did not finish: {_cluster(kube, ns).get('status')}")
    TIMINGS["roll of 3"] = round(time.monotonic() - t0)
    # A rolling restart keeps the cluster serving: Ready stays True, RollingRestart beside it.
    assert {ready for ready, _ in ready_seen} == {"True"}, ready_seen
    assert ("True", "True") in ready_seen, ready_seen
    # Never the active controller (the quorum leader the operator read with DescribeQuorum)
    # while another broker still waited; leadership can move during a roll (a restarted
    # voter may start an election), so "last" is judged at each deletion.
    assert sorted(restarted) == sorted(roll["order"]) == sorted(before), (restarted, roll)
    assert restarted == roll["order"], (restarted, roll)
    for pod in roll["order"][:-1]:
        assert roll["controllerAt"][pod] != int(pod.rsplit("-", 1)[1]), roll
    expected = roll["order"]
    assert roll["urpBefore"] == {pod: 0 for pod in expected}
    events = [e for e in kube.list("Event", ns, fieldSelector=f"involvedObject.name={CLUSTER}")
              if e["reason"] == "RollingRestart"]
    assert len(events) >= 3


def test_the_stream_lost_nothing_and_has_no_duplicates(k8s, scaled):
    kube, ns = k8s.kube, scaled["ns"]
    kube.request("POST", _cr_path(ns, "topics"), {
        "apiVersion": "rillet.io/v1alpha1", "kind": "Topic",
        "metadata": {"name": f"{STREAM}-stop", "namespace": ns},
        "spec": {"cluster": CLUSTER, "partitions": 1, "replicas": 1}})
    result = job_result(kube, ns, scaled["stream_job"], timeout=600)
    print(f"\nstream: {result}")
    assert result["sent"] > 0 and result["stopped_by"] == "topic", result
    assert result["failed"] == 0, result
    assert result["missing"] == 0 and result["duplicates"] == 0, result
