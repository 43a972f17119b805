"""Conditions, broker status and topic plans: the operator's pure decisions."""
from __future__ import annotations

from rillet_operator import cluster_status, conditions, topics
from rillet_operator.conditions import Outcome
from rillet_operator.spec import parse_cluster, parse_topic


def test_transition_time_moves_only_when_status_changes():
    c1 = conditions.apply_outcome([], Outcome(False, "BrokersNotReady", "1/3", reconciling=True),
                                  "T1", 1)
    ready = conditions.get(c1, "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] == "T1"
    assert conditions.get(c1, "Reconciling")["status"] == "True"
    c2 = conditions.apply_outcome(c1, Outcome(False, "BrokersNotReady", "2/3", reconciling=True),
                                  "T2", 1)
    assert conditions.get(c2, "Ready")["lastTransitionTime"] == "T1"
    assert conditions.get(c2, "Ready")["message"] == "2/3"
    c3 = conditions.apply_outcome(c2, Outcome(True, "Ready", "3/3"), "T3", 2)
    r3 = conditions.get(c3, "Ready")
    assert (r3["status"], r3["lastTransitionTime"], r3["observedGeneration"]) == ("True", "T3", 2)
    assert conditions.get(c3, "Reconciling")["status"] == "False"
    assert conditions.get(c3, "Error")["status"] == "False"
    assert [c["type"] for c in c3] == ["Ready", "Reconciling", "Error"]
    bad = conditions.apply_outcome(c3, Outcome(False, "InvalidConfig", "x", error=True), "T4")
    assert conditions.get(bad, "Error")["reason"] == "InvalidConfig"


def _pod(name, node, ready, phase="Running"):
    return {"metadata": {"name": name}, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_broker_status_from_pods_and_nodes():
    spec = parse_cluster("c", "ns", {"replicas": 3, "rack": {"topologyKey": "zone"}})
    pods = {"c-broker-0": _pod("c-broker-0", "n1", True),
            "c-broker-1": _pod("c-broker-1", "n2", False)}
    brokers = cluster_status.brokers(spec, pods, {"n1": {"zone": "a"}, "n2": {"zone": "b"}})
    assert brokers == [
        {"id": 0, "pod": "c-broker-0", "state": "Ready", "node": "n1", "rack": "a"},
        {"id": 1, "pod": "c-broker-1", "state": "Starting", "node": "n2", "rack": "b"},
        {"id": 2, "pod": "c-broker-2", "state": "Missing"}]
    out = cluster_status.outcome(spec, brokers)
    assert not out.ready and out.reason == "BrokersNotReady" and "1/3" in out.message
    all_ready = [dict(b, state="Ready") for b in brokers]
    assert cluster_status.outcome(spec, all_ready).ready


def _topic(partitions=6, replicas=3, config=None):
    return parse_topic("orders", "ns", {"cluster": "c", "partitions": partitions,
                                        "replicas": replicas, "config": config or {}})


def _observed(partitions=6, rf=3, configs=None):
    return topics.ObservedTopic("orders", "id", {p: tuple(range(rf)) for p in range(partitions)},
                                {p: tuple(range(rf)) for p in range(partitions)}, configs or {})


def test_topic_plans():
    assert topics.plan(_topic(), None).create
    assert topics.plan(_topic(), _observed()).empty
    up = topics.plan(_topic(partitions=8), _observed())
    assert up.partitions_to == 8 and not up.create
    down = topics.plan(_topic(partitions=3), _observed())
    assert down.refusal[0] == "PartitionDecreaseNotSupported" and down.empty
    rf = topics.plan(_topic(replicas=2), _observed())
    assert rf.replicas_to == 2 and rf.refusal is None and not rf.empty
    grow = topics.plan(_topic(partitions=8, replicas=5), _observed())
    assert grow.replicas_to == 5 and grow.partitions_to == 8
    # A move in flight lists more replicas than the factor: not done yet.
    moving = _observed()
    moving.partitions[0] = (0, 1, 2, 3)
    assert topics.plan(_topic(), moving).replicas_to == 3
    cfg = topics.plan(_topic(config={"retention.ms": 1000, "cleanup.policy": "delete"}),
                      _observed(configs={"retention.ms": "5", "segment.bytes": "1048576",
                                         "cleanup.policy": "delete"}))
    assert cfg.set_configs == {"retention.ms": "1000"}
    assert cfg.delete_configs == ("segment.bytes",)
    # A rebalance's throttle on the topic is left alone (the Cluster clears it when done).
    throttled = topics.plan(_topic(), _observed(configs={
        "leader.replication.throttled.replicas": "*", "retention.ms": "5"}))
    assert throttled.delete_configs == ("retention.ms",)


def test_topic_name_defaults_to_metadata_name():
    assert _topic().topic_name == "orders"
    assert parse_topic("t", "ns", {"cluster": "c", "topicName": "real"}).topic_name == "real"


def test_peering_priority_is_random_per_process_unless_given(monkeypatch):
    """Kopf pauses every replica that sees a peer of equal priority: two replicas must differ."""
    import kopf

    from rillet_operator.main import configure
    monkeypatch.delenv("RILLET_PEERING_PRIORITY", raising=False)
    priorities = set()
    for _ in range(5):
        settings = kopf.OperatorSettings()
        configure(settings=settings)
        priorities.add(settings.peering.priority)
    assert len(priorities) == 5 and min(priorities) > 0
    monkeypatch.setenv("RILLET_PEERING_PRIORITY", "7")
    settings = kopf.OperatorSettings()
    configure(settings=settings)
    assert settings.peering.priority == 7


def test_status_values_replace_what_was_there_under_merge_patches():
    from rillet_operator.handlers.common import replacing
    old = {"plan": {"a/0": [1], "b/0": [2]}, "phase": "Moving", "current": {"pod": "p"}}
    new = {"plan": {"a/0": [3]}, "phase": "Done"}
    assert replacing(old, new) == {"plan": {"a/0": [3], "b/0": None}, "phase": "Done",
                                   "current": None}
    assert replacing(None, new) == new


def test_a_new_topic_wider_than_the_cluster_is_refused_like_an_existing_one():
    """Issue 32: a new Topic got TopicError with the broker's raw error 38."""
    wide = _topic(replicas=10)
    step = topics.plan(wide, None, brokers=4)
    assert not step.create and step.refusal == (
        "InvalidReplicationFactor",
        "topic orders: replication factor 10 needs 10 brokers; the cluster has 4")
    assert topics.replication_refusal("orders", 10, 4) == step.refusal
    assert topics.plan(_topic(replicas=3), None, brokers=3).create
    assert topics.plan(wide, None).create            # broker count unknown: the broker decides
