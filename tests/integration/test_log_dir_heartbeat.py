"""KIP-858's log dirs in BrokerRegistration (v2, LogDirs) and BrokerHeartbeat (v1,
OfflineLogDirs), over the wire to a real rillet controller, as a Kafka 3.7+ broker sends them.

The test plays broker 9 on node 1's controller listener: it registers with two log dir
ids, is unfenced, leads two partitions (one replica in each dir, told with
AssignReplicasToDirs), then heartbeats naming one dir offline: the controller moves the
leadership of that dir's partition to node 1 and takes broker 9 out of its ISR, while
broker 9 keeps leading the other. A plain heartbeat after that changes nothing back.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.cluster import LocalCluster
from tests.integration.test_cluster import WAIT_S
from tests.polling import wait_until
from tests.wire import Wire

FAKE = 9
BAD, GOOD = uuid.uuid4(), uuid.uuid4()
# Beyond any metadata offset this test reaches: the controller counts broker 9 caught up.
CAUGHT_UP = 1 << 40


def _state(bootstrap: str, topic: str) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) of partition 0 of `topic`."""
    with Wire(bootstrap, timeout=15) as w:
        resp = w.request(3, 7, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    part = resp.topics[0].partitions[0]
    return int(part.leader_id), tuple(part.isr_nodes)


def _heartbeat(w: Wire, epoch: int, offline: list[uuid.UUID]) -> Any:
    resp = w.request(63, 1, {"broker_id": FAKE, "broker_epoch": epoch,
                             "current_metadata_offset": CAUGHT_UP, "want_fence": False,
                             "want_shut_down": False, "offline_log_dirs": offline})
    assert int(resp.error_code) == 0, resp
    return resp


def lead_one_partition_per_dir(bootstrap: str, controller: str, epoch: int,
                               dirs: dict[str, uuid.UUID]) -> None:
    """Broker FAKE (registered at `epoch`) made the leader of a new one-partition topic per
    entry of `dirs` (topic name -> dir id), each replica assigned to its dir (KIP-858)."""
    with Wire(bootstrap, timeout=30) as w:
        resp = w.request(19, 7, {"timeout": 15000, "validate_only": False, "topics": [
            {"name": name, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [FAKE, 1]}],
             "configs": []} for name in dirs]})
    assert [int(t.error_code) for t in resp.topics] == [0] * len(dirs), resp
    ids = {t.name: t.topic_id for t in resp.topics}
    with Wire(controller, timeout=15) as ctl:
        assigned = ctl.request(73, 0, {"broker_id": FAKE, "broker_epoch": epoch, "directories": [
            {"id_": d, "topics": [{"topic_id": ids[name], "partitions": [{"partition_index": 0}]}]}
            for name, d in dirs.items()]})
    assert int(assigned.error_code) == 0, assigned
    for topic in dirs:
        wait_until(lambda t=topic: _state(bootstrap, t)[0] == FAKE, WAIT_S,
                   f"broker 9 leading `{topic}`")


def test_a_heartbeat_naming_an_offline_dir_moves_leadership_off_its_replicas(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, nodes=1,
                           extra_config={"broker.session.timeout.ms": 120000,
                                         "offsets.topic.num.partitions": 1})
    with cluster.start():
        node = cluster.node(1)
        with Wire(node.bootstrap, timeout=15) as w:
            cluster_id = w.request(3, 7, {"topics": [], "allow_auto_topic_creation": False}
                                   ).cluster_id
        controller = f"127.0.0.1:{cluster.specs[0].controller_port}"
        with Wire(controller, timeout=15) as ctl:
            reg = ctl.request(62, 2, {
                "broker_id": FAKE, "cluster_id": cluster_id, "incarnation_id": uuid.uuid4(),
                "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1,
                               "security_protocol": 0}],
                "features": [], "rack": None, "log_dirs": [BAD, GOOD]})
            assert int(reg.error_code) == 0, reg
            epoch = int(reg.broker_epoch)
            wait_until(lambda: not _heartbeat(ctl, epoch, []).is_fenced, WAIT_S,
                       "broker 9 unfenced")
            lead_one_partition_per_dir(node.bootstrap, controller, epoch,
                                       {"bad": BAD, "good": GOOD})

            _heartbeat(ctl, epoch, [BAD])
            wait_until(lambda: _state(node.bootstrap, "bad") == (1, (1,)), WAIT_S,
                       "`bad` led by node 1, broker 9 out of its ISR")
            assert _state(node.bootstrap, "good")[0] == FAKE
            # Still offline in the next heartbeats, and it stays so.
            assert not _heartbeat(ctl, epoch, [BAD]).is_fenced
            assert _state(node.bootstrap, "bad") == (1, (1,))
            assert _state(node.bootstrap, "good")[0] == FAKE
