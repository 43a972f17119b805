"""What a fuzz campaign aims at: listeners of real broker processes, and how to tell they live.

A target is one listener of one node; its kind (client or controller) says which corpus feeds
it. `answers` is the probe after every batch (ApiVersions on that listener within a bound);
`serving` the check at the end of a campaign that a node still does its job (it names a
controller in Metadata), since fuzzed quorum RPCs could leave ApiVersions answering while the
quorum is wrecked.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import LocalCluster
from tests.harness import BrokerProcess, free_port
from tests.wire import Wire

PROBE_TIMEOUT_S = 10.0   # a listener that cannot answer ApiVersions within this has hung
CLOSE_WAIT = "08"         # the TCP state code in /proc/net/tcp
SERVING_TIMEOUT_S = 60.0  # a node must name a controller again within this after the campaign

# The node a single-node campaign fuzzes: a PLAINTEXT and a SASL_PLAINTEXT client listener (the
# SASL one decodes only the handshake APIs before authentication: a path of its own), and the
# StandardAuthorizer with the PLAINTEXT principal a super user, so ACL requests are acted on.
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_paula="paula-secret";')
NODE_CONFIG = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "connection.failed.authentication.delay.ms": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS"}


@dataclass(frozen=True)
class Target:
    """One listener of one node."""
    node: BrokerProcess
    host: str
    port: int
    listener: str  # "client" or "controller": which corpus feeds it

    @property
    def name(self) -> str:
        return f"node {self.node.node_id} {self.listener} :{self.port}"


def fuzz_node(data_dir: Path) -> BrokerProcess:
    """A single node (not started) with the listeners `single_node_targets` names."""
    node = BrokerProcess(data_dir, config=NODE_CONFIG)
    node.config["listeners"] = (f"PLAINTEXT://{node.host}:{node.port},"
                                f"SASL_PLAINTEXT://{node.host}:{free_port(node.host)}")
    return node


def single_node_targets(node: BrokerProcess) -> list[Target]:
    """Every client listener of a node made by `fuzz_node` (or the one of a plain node)."""
    listeners = node.config.get("listeners", f"PLAINTEXT://{node.host}:{node.port}")
    return [Target(node, node.host, int(address.rsplit(":", 1)[1]), "client")
            for address in listeners.split(",")]


def cluster_targets(cluster: LocalCluster) -> list[Target]:
    out = []
    for spec in cluster.specs:
        node = cluster.node(spec.node_id)
        out.append(Target(node, spec.host, spec.client_port, "client"))
        out.append(Target(node, spec.host, spec.controller_port, "controller"))
    return out


def answers(target: Target, timeout: float = PROBE_TIMEOUT_S) -> bool:
    try:
        with Wire(f"{target.host}:{target.port}", timeout=timeout) as wire:
            return wire.request(18, 0, {}).error_code == 0
    except OSError:
        return False


def serving(node: BrokerProcess, timeout: float = SERVING_TIMEOUT_S) -> bool:
    """The node answers Metadata naming a live controller, within ``timeout`` (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Wire(node.bootstrap, timeout=PROBE_TIMEOUT_S) as wire:
                metadata = wire.request(3, 12, {
                    "topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
            if metadata.controller_id >= 0 and metadata.brokers:
                return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def rss_kb(node: BrokerProcess) -> int:
    """Resident set size of the node's process, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{_pid(node)}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def open_fds(node: BrokerProcess) -> int:
    """File descriptors the node's process holds (sockets included), 0 when it is gone."""
    try:
        return len(os.listdir(f"/proc/{_pid(node)}/fd"))
    except (OSError, ValueError):
        return 0


def closed_by_peer(node: BrokerProcess) -> int:
    """The node's connections whose other end has closed but the node has not (TCP
    CLOSE_WAIT), 0 when it is gone. Once the campaign has closed every connection it made,
    any left for long are connections the node leaks."""
    try:
        fd_dir = f"/proc/{_pid(node)}/fd"
        inodes = {link[8:-1] for link in (_link(f"{fd_dir}/{fd}") for fd in os.listdir(fd_dir))
                  if link.startswith("socket:[")}
    except (OSError, ValueError):
        return 0
    return sum(1 for inode in _tcp_inodes_in_state(CLOSE_WAIT) if inode in inodes)


def _tcp_inodes_in_state(state: str) -> list[str]:
    """Inodes of the machine's TCP sockets in ``state`` (hex code of /proc/net/tcp)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        found += [cols[9] for cols in (row.split() for row in rows) if cols[3] == state]
    return found


def partitions(node: BrokerProcess) -> int:
    """Partitions the node's Metadata lists (the fuzzed CreateTopics made most), -1 unanswered."""
    try:
        with Wire(node.bootstrap, timeout=PROBE_TIMEOUT_S) as wire:
            metadata = wire.request(3, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
        return sum(len(topic.partitions) for topic in metadata.topics)
    except OSError:
        return -1


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed since it was listed
        return ""


def _pid(node: BrokerProcess) -> int:
    if node.proc is None:
        raise ValueError("not started")
    return node.proc.pid
