"""A multi-node rillet cluster on one machine: each node's settings, and the processes that run it.

`run_local_cluster(nodes, data_dir, base_port)` (the `rillet cluster` command) starts one
`python -m rillet serve --set k=v ...` process per node and stops them all on Ctrl-C or SIGTERM.
The settings come from pure functions (`plan_nodes`, `cluster_settings`), which the test
harness (tests/cluster.py) uses too, with its own ports and per-link proxies.

Port layout, base port B, nodes counted from 1: node i's client (PLAINTEXT) listener is
B + 10*(i-1), its CONTROLLER listener the port after it. With B=19092: node 1 on 19092/19093,
node 2 on 19102/19103, node 3 on 19112/19113. One block of ten per node keeps the ports easy to
read off and leaves room beside them.

Files under the data dir D: D/node-<i>/ is node i's log dir, D/node-<i>.log its output, and
D/cluster.id the cluster id, made on the first run and reused on every later one (the node
dirs are formatted with it, so a new id would make every node refuse to start).

Voters: the first min(3, N) nodes run broker and controller ("combined") and are the
controller.quorum.voters; further nodes are brokers only. The operator picks voters by the
same rule (the lowest ordinals).

Racks: with racks [a, b, c], node i gets broker.rack = racks[(i-1) % len(racks)].
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from .defs.broker_config import parse_overrides
from .defs.broker_defs import config_text
from .defs.cluster_id import new_cluster_id

PORT_STRIDE = 10
MAX_VOTERS = 3
CLUSTER_ID_FILE = "cluster.id"
CLIENT_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"

# The keys the renderer owns: the harness and `rillet cluster` keep their own port and
# directory bookkeeping from the same plan, so an override of one of these would make the
# node disagree with everything that talks to it.
RENDERED_KEYS = frozenset({
    "node.id", "process.roles", "listeners", "controller.listener.names",
    "inter.broker.listener.name", "listener.security.protocol.map",
    "controller.quorum.voters", "cluster.id", "log.dirs",
})

_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")

# (from node id, to voter id) -> "host:port" that node uses to reach that voter.
PeerAddress = Callable[[int, int], str]


@dataclass(frozen=True)
class NodeSpec:
    """Where one node listens and keeps its data."""
    node_id: int
    log_dir: Path
    client_port: int
    controller_port: int
    host: str = "127.0.0.1"
    rack: str | None = None
    voter: bool = True

    @property
    def client_address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def controller_address(self) -> str:
        return f"{self.host}:{self.controller_port}"


def default_voter_count(nodes: int) -> int:
    return min(nodes, MAX_VOTERS)


def rack_of(node_id: int, racks: Sequence[str] | None) -> str | None:
    return racks[(node_id - 1) % len(racks)] if racks else None


def layout_ports(node_id: int, base_port: int) -> tuple[int, int]:
    """(client port, controller port) of node `node_id` under the module's port layout."""
    client = base_port + PORT_STRIDE * (node_id - 1)
    return client, client + 1


def plan_nodes(nodes: int, data_dir: Path, base_port: int, racks: Sequence[str] | None = None,
               host: str = "127.0.0.1", voter_count: int | None = None) -> list[NodeSpec]:
    """The nodes of a cluster laid out from one base port (see the module docstring)."""
    ports = [layout_ports(i, base_port) for i in range(1, nodes + 1)]
    return plan_nodes_on(ports, data_dir, racks, host, voter_count)


def plan_nodes_on(ports: Sequence[tuple[int, int]], data_dir: Path,
                  racks: Sequence[str] | None = None, host: str = "127.0.0.1",
                  voter_count: int | None = None) -> list[NodeSpec]:
    """The nodes of a cluster on given (client, controller) ports, node i on ports[i-1]."""
    nodes = len(ports)
    if nodes < 1:
        raise ValueError("a cluster needs at least one node")
    voters = default_voter_count(nodes) if voter_count is None else voter_count
    if not 1 <= voters <= nodes:
        raise ValueError(f"voter count must be 1..{nodes}, got {voters}")
    for port in (p for pair in ports for p in pair):
        if not 0 < port <= 65535:
            raise ValueError(f"port {port} is out of range")
    return [NodeSpec(node_id=i, log_dir=Path(data_dir) / f"node-{i}", client_port=client,
                     controller_port=controller, host=host, rack=rack_of(i, racks),
                     voter=i <= voters)
            for i, (client, controller) in enumerate(ports, 1)]


def check_cluster_id(cluster_id: str) -> str:
    if not _CLUSTER_ID.match(cluster_id):
        raise ValueError(f"cluster id must be 22 base64url characters, got {cluster_id!r}")
    return cluster_id


def voters_value(node: NodeSpec, specs: Sequence[NodeSpec],
                 peer_address: PeerAddress | None = None) -> str:
    """controller.quorum.voters as `node` sees it.

    Its own entry is always its own CONTROLLER listener (a voter finds itself in the list by
    that address); another voter's entry is whatever `peer_address` says reaches it from this
    node, e.g. the proxy of that one link, so a link can be cut on its own."""
    def address(voter: NodeSpec) -> str:
        if voter.node_id == node.node_id or peer_address is None:
            return voter.controller_address
        return peer_address(node.node_id, voter.node_id)
    return ",".join(f"{v.node_id}@{address(v)}" for v in specs if v.voter)


def node_settings(node: NodeSpec, specs: Sequence[NodeSpec], cluster_id: str,
                  peer_address: PeerAddress | None = None,
                  extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Every setting node `node` is started with, by Kafka's config names."""
    clashing = RENDERED_KEYS & set(extra or {})
    if clashing:
        raise ValueError(f"extra config may not set {sorted(clashing)}: the cluster layout does")
    listeners = [f"{CLIENT_LISTENER}://{node.client_address}"]
    if node.voter:
        listeners.append(f"{CONTROLLER_LISTENER}://{node.controller_address}")
    settings = {
        "node.id": str(node.node_id),
        "process.roles": "broker,controller" if node.voter else "broker",
        "listeners": ",".join(listeners),
        "controller.listener.names": CONTROLLER_LISTENER,
        "inter.broker.listener.name": CLIENT_LISTENER,
        "listener.security.protocol.map":
            f"{CLIENT_LISTENER}:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
        "controller.quorum.voters": voters_value(node, specs, peer_address),
        "cluster.id": check_cluster_id(cluster_id),
        "log.dirs": str(node.log_dir),
    }
    if node.rack is not None:
        settings["broker.rack"] = node.rack
    settings.update({key: config_text(value) for key, value in (extra or {}).items()})
    return settings


def cluster_settings(specs: Sequence[NodeSpec], cluster_id: str,
                     peer_address: PeerAddress | None = None,
                     extra: Mapping[str, Any] | None = None) -> dict[int, dict[str, str]]:
    """node id -> that node's settings."""
    ids = [s.node_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"node ids must be unique, got {ids}")
    return {s.node_id: node_settings(s, specs, cluster_id, peer_address, extra) for s in specs}


def serve_command(settings: Mapping[str, Any], python: str = sys.executable) -> list[str]:
    """The `python -m rillet serve --set k=v ...` command line of one node."""
    cmd = [python, "-m", "rillet", "serve"]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={config_text(value)}"]
    return cmd


def bootstrap_servers(specs: Sequence[NodeSpec]) -> str:
    return ",".join(s.client_address for s in specs)


def load_or_create_cluster_id(data_dir: Path) -> str:
    """The cluster id kept in data_dir; made (and written atomically) on first use."""
    path = Path(data_dir) / CLUSTER_ID_FILE
    if path.exists():
        return check_cluster_id(path.read_text().strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    cluster_id = new_cluster_id()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cluster_id + "\n")
    os.replace(tmp, path)
    return cluster_id


def is_listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def stop_processes(procs: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM every process, wait up to `grace` seconds in all, then SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            # A node someone paused (SIGSTOP) only sees the SIGTERM once it runs again.
            proc.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class _Node:
    spec: NodeSpec
    proc: subprocess.Popen[bytes]
    log_path: Path
    exit_reported: bool = False


def _spawn(spec: NodeSpec, settings: Mapping[str, str], log_path: Path) -> _Node:
    spec.log_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(serve_command(settings), stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return _Node(spec, proc, log_path)


def _wait_listening(node: _Node, deadline: float, stop: threading.Event) -> bool:
    while time.monotonic() < deadline and not stop.is_set() and node.proc.poll() is None:
        if is_listening(node.spec.host, node.spec.client_port):
            return True
        stop.wait(0.1)
    return False


def _describe(node: _Node) -> str:
    spec = node.spec
    parts = [f"node {spec.node_id}: {spec.client_address}"]
    if spec.voter:
        parts.append(f"controller {spec.controller_address}")
    if spec.rack is not None:
        parts.append(f"rack {spec.rack}")
    parts += [f"pid {node.proc.pid}", f"log {node.log_path}"]
    return ", ".join(parts)


def _report_exits(nodes: Sequence[_Node], out: TextIO) -> None:
    for node in nodes:
        code = node.proc.poll()
        if code is not None and not node.exit_reported:
            node.exit_reported = True
            print(f"node {node.spec.node_id} exited with code {code} "
                  f"(log {node.log_path})", file=out, flush=True)


def _on_signals(stop: threading.Event) -> Callable[[], None]:
    """Make SIGINT and SIGTERM set `stop`; returns what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # signal handlers can only be installed from the main thread
    old = {sig: signal.signal(sig, lambda *_: stop.set())
           for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return restore


@dataclass(frozen=True)
class ClusterPlan:
    """Everything `rillet cluster` starts, decided before any process runs."""
    data_dir: Path
    cluster_id: str
    specs: tuple[NodeSpec, ...]
    settings: Mapping[int, Mapping[str, str]]

    def log_path(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}.log"


def plan_local_cluster(nodes: int, data_dir: Path, base_port: int = 19092,
                       racks: Sequence[str] | None = None,
                       extra_config: Mapping[str, Any] | None = None,
                       host: str = "127.0.0.1") -> ClusterPlan:
    """The plan of a local cluster; a bad layout or config raises ValueError, and then
    nothing is written (the cluster id file is made last)."""
    data_dir = Path(data_dir)
    specs = plan_nodes(nodes, data_dir, base_port, racks, host)
    cluster_settings(specs, new_cluster_id(), extra=extra_config)  # raises before any write
    cluster_id = load_or_create_cluster_id(data_dir)
    return ClusterPlan(data_dir, cluster_id, tuple(specs),
                       cluster_settings(specs, cluster_id, extra=extra_config))


def run_local_cluster(nodes: int, data_dir: Path, base_port: int = 19092,
                      racks: Sequence[str] | None = None,
                      extra_config: Mapping[str, Any] | None = None,
                      host: str = "127.0.0.1", stop_timeout: float = 20.0,
                      ready_timeout: float = 60.0, out: TextIO | None = None,
                      stop: threading.Event | None = None) -> int:
    """Run an N-node cluster until Ctrl-C/SIGTERM (or `stop` is set); 0 then, 1 if every node
    exited by itself first.

    A node that exits while others run is reported and left down, so a node can be killed by
    hand to watch the rest carry on."""
    plan = plan_local_cluster(nodes, data_dir, base_port, racks, extra_config, host)
    return run_plan(plan, stop_timeout, ready_timeout, out, stop)


def run_plan(plan: ClusterPlan, stop_timeout: float = 20.0, ready_timeout: float = 60.0,
             out: TextIO | None = None, stop: threading.Event | None = None) -> int:
    """run_local_cluster for a plan made already."""
    out = out or sys.stdout
    stop = stop or threading.Event()
    restore_signals = _on_signals(stop)
    running: list[_Node] = []
    try:
        print(f"rillet cluster {plan.cluster_id}: {len(plan.specs)} node(s), "
              f"data in {plan.data_dir}", file=out, flush=True)
        for spec in plan.specs:  # one by one: a failed spawn still stops those started
            running.append(_spawn(spec, plan.settings[spec.node_id], plan.log_path(spec.node_id)))
        deadline = time.monotonic() + ready_timeout
        for node in running:
            ready = _wait_listening(node, deadline, stop)
            suffix = "" if ready or stop.is_set() else " (NOT listening yet: see its log)"
            print(_describe(node) + suffix, file=out, flush=True)
        print(f"bootstrap.servers={bootstrap_servers(plan.specs)}", file=out, flush=True)
        print("Ctrl-C stops every node.", file=out, flush=True)
        while not stop.wait(0.5):
            _report_exits(running, out)
            if all(n.proc.poll() is not None for n in running):
                return 1
        return 0
    finally:
        stop_processes([n.proc for n in running], stop_timeout)
        restore_signals()
        print("all nodes stopped", file=out, flush=True)


def main(argv: Sequence[str] | None = None, prog: str = "rillet cluster") -> int:
    """`rillet cluster [--nodes N] [--data DIR] [--base-port P] [--racks a,b,c] [--set k=v]`."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Run a multi-node rillet cluster on this machine until Ctrl-C.",
        epilog=f"Node i listens on BASE+{PORT_STRIDE}*(i-1) (clients) and the port after it "
               "(CONTROLLER).")
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    parser.add_argument("--data", type=Path, default=Path("./rillet-cluster"),
                        help="data dir: one dir and one log per node (default ./rillet-cluster)")
    parser.add_argument("--base-port", type=int, default=19092,
                        help="client port of node 1 (default 19092)")
    parser.add_argument("--racks", type=lambda s: [r for r in s.split(",") if r],
                        help="comma-separated racks, given to nodes round-robin")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config for every node (repeatable)")
    parser.add_argument("--stop-timeout", type=float, default=20.0,
                        help="seconds to wait after SIGTERM before SIGKILL (default 20)")
    args = parser.parse_args(argv)
    try:
        plan = plan_local_cluster(args.nodes, args.data, args.base_port, args.racks,
                                  parse_overrides(args.set), args.host)
    except ValueError as exc:  # ConfigError from parse_overrides is a ValueError too
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return run_plan(plan, args.stop_timeout)


if __name__ == "__main__":
    sys.exit(main())
