"""The settings of a local cluster's nodes, rendered without starting anything."""
from __future__ import annotations

from pathlib import Path

import pytest

from rillet.defs.broker_config import BrokerConfig
from rillet.local_cluster import (RENDERED_KEYS, cluster_settings, config_text,
                                  load_or_create_cluster_id, plan_local_cluster, plan_nodes,
                                  plan_nodes_on, serve_command)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def test_ports_follow_the_documented_layout(tmp_path: Path) -> None:
    specs = plan_nodes(3, tmp_path, 19092)
    assert [(s.client_port, s.controller_port) for s in specs] == [
        (19092, 19093), (19102, 19103), (19112, 19113)]
    assert [s.log_dir for s in specs] == [tmp_path / f"node-{i}" for i in (1, 2, 3)]


def test_each_node_gets_the_kafka_settings_of_a_combined_node(tmp_path: Path) -> None:
    settings = cluster_settings(plan_nodes(3, tmp_path, 19092), CLUSTER_ID)
    assert settings[2] == {
        "node.id": "2",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:19102,CONTROLLER://127.0.0.1:19103",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters":
            "1@127.0.0.1:19093,2@127.0.0.1:19103,3@127.0.0.1:19113",
        "cluster.id": CLUSTER_ID,
        "log.dirs": str(tmp_path / "node-2"),
    }
    assert {s["cluster.id"] for s in settings.values()} == {CLUSTER_ID}


def test_rendered_settings_are_a_valid_broker_config(tmp_path: Path) -> None:
    settings = cluster_settings(plan_nodes(3, tmp_path, 19092, racks=["a", "b", "c"]),
                                CLUSTER_ID, extra={"num.partitions": 6})
    for node_id, node in settings.items():
        config = BrokerConfig.load(None, node)
        assert config.node_id == node_id
        assert [lst.name for lst in config.listeners] == ["PLAINTEXT", "CONTROLLER"]
        assert config.advertised_listeners[0].name == "PLAINTEXT"  # what clients are told
        assert len(config["controller.quorum.voters"]) == 3
        assert config["num.partitions"] == 6


def test_a_node_reaches_other_voters_through_the_given_addresses(tmp_path: Path) -> None:
    specs = plan_nodes(3, tmp_path, 19092)
    proxies = {(a, b): f"127.0.0.1:{30000 + 10 * a + b}" for a in (1, 2, 3) for b in (1, 2, 3)}
    settings = cluster_settings(specs, CLUSTER_ID, lambda a, b: proxies[(a, b)])
    # Own entry: own CONTROLLER listener; the others: the proxy of that one link.
    assert settings[1]["controller.quorum.voters"] == (
        "1@127.0.0.1:19093,2@127.0.0.1:30012,3@127.0.0.1:30013")
    assert settings[3]["controller.quorum.voters"] == (
        "1@127.0.0.1:30031,2@127.0.0.1:30032,3@127.0.0.1:19113")


def test_racks_go_round_robin(tmp_path: Path) -> None:
    specs = plan_nodes(5, tmp_path, 19092, racks=["a", "b"], voter_count=3)
    assert [s.rack for s in specs] == ["a", "b", "a", "b", "a"]
    settings = cluster_settings(specs, CLUSTER_ID)
    assert settings[3]["broker.rack"] == "a"
    assert "broker.rack" not in cluster_settings(plan_nodes(1, tmp_path, 19092), CLUSTER_ID)[1]


def test_nodes_beyond_three_are_brokers_only(tmp_path: Path) -> None:
    settings = cluster_settings(plan_nodes(5, tmp_path, 19092), CLUSTER_ID)
    assert [settings[i]["process.roles"] for i in (1, 2, 3, 4, 5)] == (
        ["broker,controller"] * 3 + ["broker"] * 2)
    assert settings[4]["listeners"] == "PLAINTEXT://127.0.0.1:19122"
    assert settings[4]["controller.quorum.voters"] == settings[1]["controller.quorum.voters"]
    assert settings[5]["controller.quorum.voters"].count("@") == 3


def test_a_single_node_is_its_own_voter(tmp_path: Path) -> None:
    (settings,) = cluster_settings(plan_nodes(1, tmp_path, 9092), CLUSTER_ID).values()
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9093"


@pytest.mark.parametrize("bad", [
    dict(nodes=0), dict(nodes=3, voter_count=4), dict(nodes=3, voter_count=0),
    dict(nodes=2, base_port=65530),
])
def test_impossible_layouts_are_refused(tmp_path: Path, bad: dict) -> None:
    args = {"base_port": 19092, **bad}
    with pytest.raises(ValueError):
        plan_nodes(args.pop("nodes"), tmp_path, **args)


def test_extra_config_may_not_move_what_the_layout_owns(tmp_path: Path) -> None:
    specs = plan_nodes(3, tmp_path, 19092)
    for key in sorted(RENDERED_KEYS):
        with pytest.raises(ValueError, match=key):
            cluster_settings(specs, CLUSTER_ID, extra={key: "x"})


def test_bad_cluster_ids_and_duplicate_node_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="22 base64url"):
        cluster_settings(plan_nodes(1, tmp_path, 19092), "not an id")
    spec = plan_nodes(1, tmp_path, 19092)[0]
    with pytest.raises(ValueError, match="unique"):
        cluster_settings([spec, spec], CLUSTER_ID)


def test_explicit_ports_are_used_as_given(tmp_path: Path) -> None:
    specs = plan_nodes_on([(5000, 6000), (5001, 6001)], tmp_path)
    assert [s.client_address for s in specs] == ["127.0.0.1:5000", "127.0.0.1:5001"]
    assert [s.controller_address for s in specs] == ["127.0.0.1:6000", "127.0.0.1:6001"]


def test_values_are_spelled_as_set_expects() -> None:
    assert [config_text(v) for v in (True, False, 3, ["a", "b"], "x")] == [
        "true", "false", "3", "a,b", "x"]
    cmd = serve_command({"node.id": 1, "auto.create.topics.enable": False}, python="py")
    assert cmd == ["py", "-m", "rillet", "serve", "--set", "node.id=1",
                   "--set", "auto.create.topics.enable=false"]


def test_the_cluster_id_is_made_once_and_kept(tmp_path: Path) -> None:
    first = load_or_create_cluster_id(tmp_path / "data")
    assert len(first) == 22
    assert load_or_create_cluster_id(tmp_path / "data") == first
    assert (tmp_path / "data" / "cluster.id").read_text().strip() == first


def test_a_bad_plan_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        plan_local_cluster(3, tmp_path / "data", 19092, extra_config={"node.id": "9"})
    assert not (tmp_path / "data").exists()
    plan = plan_local_cluster(2, tmp_path / "data", 19092)
    assert plan.cluster_id == load_or_create_cluster_id(tmp_path / "data")
    assert plan.log_path(2) == tmp_path / "data" / "node-2.log"
    assert plan.settings[2]["cluster.id"] == plan.cluster_id
