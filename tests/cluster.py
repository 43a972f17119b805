"""A multi-node rillet cluster of real processes for tests, with faults on demand.

    cluster = LocalCluster(tmp_path, nodes=3)
    try:
        cluster.start()
        cluster.cut(1, 2, mode="blackhole")   # or kill_node, pause_node, isolate, ...
        ...
    finally:
        cluster.close()                       # bounded; kills every node, ends every proxy

Each node is a BrokerProcess (tests/harness.py) started with the settings rillet's own
`rillet cluster` renders (rillet/local_cluster.py), on free ports, data in
<tmp_path>/node-<i>/ and output in <tmp_path>/node-<i>.broker.log.

Controller links only (addressed=False): for every ordered pair a -> b where b is a voter,
a LinkProxy (tests/tcp_proxy.py) forwards to b's CONTROLLER listener, and node a's
controller.quorum.voters names that proxy as b's address (its own entry stays its own
listener). cut(a, b) stops both a -> b and b -> a; "refuse" resets connections at once,
"blackhole" holds every byte until heal(), so the peer times out. `link_tap`, when given,
is every link's tap (tests/tcp_proxy.py): it sees the bytes each link carries to its voter.

Every link (addressed=True; opt-in, as every byte between nodes then goes through Python
proxy threads, a cost the many tests that cut only quorum links need not pay): node i gets
its own loopback address, 127.0.0.(i+1), for its listeners and as the source of every
connection it opens, and a gate in front of each of its listeners tells its peers apart by
their addresses (tests/node_gate.py). Then every link
between two nodes is proxied, data too: quorum, replication (a follower fetching from its
leader), forwarding and registration. cut/heal/isolate work as above on every link, and a
link can also be cut one way only (cut_one_way: a -> b bytes held or refused, b -> a still
flowing on established connections) or slowed (slow). Clients (from 127.0.0.1) always get
through; `bootstrap` and node(i).bootstrap name the gates.

Clocks (fake_clocks=True): every node runs under its own fake wall clock (libfaketime,
tests/clock_faults.py), at real time until step_clock moves it; restore_all sets every clock
right again.

Limits:
- With addressed=False only controller traffic is proxied: the quorum (Vote,
  BeginQuorumEpoch, metadata Fetch) and what brokers send the controller (registration,
  heartbeats, AlterPartition). Partition data between brokers goes to the advertised
  PLAINTEXT addresses from cluster metadata, which are the same for every node, so a cut
  does not stop a follower fetching from a leader.
- Clients reach nodes directly (or through a gate that never cuts them): a cut never touches
  a client connection. Use pause_node, kill_node or stop_node to take a node away from
  clients.
- Node ports come from free_ports(): free when chosen, bound by the node a moment later,
  the same small race every BrokerProcess test has.
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from rillet.client.admin import AdminClient
from rillet.local_cluster import (NodeSpec, bootstrap_servers, cluster_settings,
                                  plan_nodes_on)
from rillet.defs.cluster_id import new_cluster_id
from tests.harness import BrokerProcess, answering, free_ports
from tests.clock_faults import FakeClock
from tests.faulty_fs import FaultyDisk
from tests.node_gate import LinkTable, NodeGate, node_address
from tests.tcp_proxy import Link, LinkMode, LinkProxy, Tap

START_TIMEOUT = 60.0


@dataclass
class ClusterNode:
    """One node: where it listens (spec) and its process."""
    spec: NodeSpec
    process: BrokerProcess


class LocalCluster:
    """N real `rillet serve` processes and the proxies of the links between them.

    Not thread-safe: one test thread drives it (chaos included); proxies run their own
    threads internally and end in close()."""

    def __init__(self, tmp_path: Path, nodes: int = 3, proxied: bool = True,
                 extra_config: Mapping[str, Any] | None = None,
                 racks: Sequence[str] | None = None, voter_count: int | None = None,
                 ready: Callable[[BrokerProcess], bool] = answering,
                 cluster_id: str | None = None, link_tap: Tap | None = None,
                 addressed: bool = False, fake_clocks: bool = False,
                 faulty_disks: bool = False) -> None:
        if addressed and not proxied:
            raise ValueError("addressed=True proxies every link; it needs proxied=True")
        self.root = Path(tmp_path)
        self.cluster_id = cluster_id or new_cluster_id()
        self.proxied = proxied
        self.addressed = addressed
        specs = _plan(nodes, self.root, racks, voter_count, addressed)
        # Before any proxy opens: without libfaketime this raises with nothing to clean up.
        self._clocks = {s.node_id: FakeClock(self.root / f"clock-{s.node_id}")
                        for s in (specs if fake_clocks else [])}
        for clock in self._clocks.values():
            clock.env()
        # (a, b) -> what carries a's traffic to b: a LinkProxy to b's controller listener,
        # or (addressed) the Link of everything a sends b.
        self._links: dict[tuple[int, int], LinkProxy | Link] = {}
        self._proxies: list[LinkProxy | NodeGate] = []
        self._gates: dict[tuple[int, str], NodeGate] = {}
        try:
            if addressed:
                self._links = dict(self._open_gates(specs, link_tap).links())
            elif proxied:
                self._links = dict(_link_proxies(specs, self._proxies, link_tap))
            settings = cluster_settings(specs, self.cluster_id,
                                        self._peer_address if proxied else None, extra_config)
            for spec in specs if addressed else []:
                settings[spec.node_id].update(self._gate_settings(spec))
            # A second log dir per node on a disk that can fail (tests/faulty_fs.py); the
            # plain one first keeps the metadata log off it.
            self._disks = {s.node_id: FaultyDisk(self.root / f"disk-{s.node_id}-backing",
                                                 self.root / f"disk-{s.node_id}",
                                                 self.root / f"disk-{s.node_id}-switch")
                           for s in (specs if faulty_disks else [])}
            for spec in specs if faulty_disks else []:
                disk = self._disks[spec.node_id]
                disk.start()
                settings[spec.node_id]["log.dirs"] = f"{spec.log_dir},{disk.mountpoint}"
        except BaseException:
            self._close_links([])
            self._close_disks([])
            raise
        self._nodes = {s.node_id: ClusterNode(s, BrokerProcess(
            s.log_dir, port=self._client_port(s), node_id=s.node_id,
            config=settings[s.node_id], host=s.host, ready=ready)) for s in specs}
        for node_id, clock in self._clocks.items():
            self.node(node_id).env.update(clock.env())

    # -- what the cluster is ----------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    @property
    def specs(self) -> list[NodeSpec]:
        return [self._nodes[i].spec for i in self.node_ids]

    @property
    def clocked(self) -> bool:
        """Whether nodes run under fake clocks (step_clock works)."""
        return bool(self._clocks)

    def clock(self, node_id: int) -> FakeClock:
        if node_id not in self._clocks:
            raise KeyError(f"node {node_id} has no fake clock (fake_clocks={self.clocked})")
        return self._clocks[node_id]

    def step_clock(self, node_id: int, seconds: float) -> None:
        """Step node_id's wall clock by `seconds` (negative: back), as NTP would."""
        self.clock(node_id).step(seconds)

    @property
    def disked(self) -> bool:
        """Whether every node has a second log dir on a disk that can fail (fail_disk)."""
        return bool(self._disks)

    def log_dirs(self, node_id: int) -> list[Path]:
        """Where node_id keeps partition logs."""
        disk = self._disks.get(node_id)
        return [self._node(node_id).spec.log_dir, *([disk.mountpoint] if disk else [])]

    def fail_disk(self, node_id: int) -> None:
        """From now on every write and fsync to node_id's second log dir fails (EIO)."""
        self._disks[node_id].fail()

    def repair_disk(self, node_id: int) -> None:
        """A failed log dir stays offline until the broker restarts (as in Kafka): repair
        the disk, then restart the node (waits until it is ready)."""
        disk = self._disks[node_id]
        failed = disk.switch.exists()
        disk.heal()
        if failed:
            self.node(node_id).stop()
            self.node(node_id).start()

    @property
    def bootstrap(self) -> str:
        """Every node's client address (its gate when addressed), comma-separated."""
        if self.addressed:
            return ",".join(self.node(i).bootstrap for i in self.node_ids)
        return bootstrap_servers(self.specs)

    def node(self, node_id: int) -> BrokerProcess:
        return self._node(node_id).process

    def link(self, a: int, b: int) -> LinkProxy | Link:
        """The proxy node a uses to reach voter b; addressed, the Link of what a sends b."""
        if (a, b) not in self._links:
            raise KeyError(f"no link {a} -> {b} (proxied={self.proxied}; links lead to voters)")
        return self._links[(a, b)]

    def links(self) -> dict[tuple[int, int], LinkProxy | Link]:
        return dict(self._links)

    def logs(self, tail: int = 4000) -> str:
        """The end of every node's log, for an assertion message."""
        return "\n".join(f"--- node {i} ---\n{self.node(i).log()[-tail:]}" for i in self.node_ids)

    # -- processes ----------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> "LocalCluster":
        """Start every node, then wait for all: a node may only be ready once a quorum is.
        A start that fails stops what it started: `with cluster.start():` enters only after
        it returns, so nothing else would (nodes left running load every later test)."""
        try:
            for node_id in self.node_ids:
                self.node(node_id).start(wait=False)
            self.wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT,
                   node_ids: Iterable[int] | None = None) -> None:
        deadline = time.monotonic() + timeout
        for node_id in self.node_ids if node_ids is None else node_ids:
            self.node(node_id).wait_ready(max(0.1, deadline - time.monotonic()))

    def start_node(self, node_id: int, timeout: float = START_TIMEOUT,
                   wait: bool = True) -> BrokerProcess:
        return self.node(node_id).start(timeout, wait)

    def stop_node(self, node_id: int, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; the exit code."""
        return self.node(node_id).stop(timeout)

    def kill_node(self, node_id: int) -> None:
        self.node(node_id).kill()

    def pause_node(self, node_id: int) -> None:
        self.node(node_id).pause()

    def resume_node(self, node_id: int) -> None:
        self.node(node_id).resume()

    # -- links --------------------------------------------------------------------------

    def cut(self, a: int, b: int, mode: str | LinkMode = LinkMode.REFUSE) -> None:
        """Cut the link between a and b, both ways."""
        for proxy in self._pair(a, b):
            proxy.cut(mode)

    def heal(self, a: int, b: int) -> None:
        for proxy in self._pair(a, b):
            proxy.heal()

    def cut_one_way(self, a: int, b: int, mode: str | LinkMode = LinkMode.BLACKHOLE) -> None:
        """Stop what a sends b only (addressed): b's bytes to a still flow on connections
        already open; a new connection between them waits (or is refused), as a TCP
        handshake needs both ways."""
        self._directed(a, b).cut(mode)

    def slow(self, a: int, b: int, seconds: float) -> None:
        """Delay every chunk a sends b by `seconds` (addressed); heal() ends it."""
        self._directed(a, b).slow(seconds)

    def isolate(self, node_id: int, mode: str | LinkMode = LinkMode.REFUSE) -> None:
        """Cut every link of one node."""
        self._node(node_id)
        for (a, b), proxy in self._links.items():
            if node_id in (a, b):
                proxy.cut(mode)

    def heal_all(self) -> None:
        for proxy in self._links.values():
            proxy.heal()

    def cut_links(self) -> list[tuple[int, int]]:
        """The directed links cut right now."""
        return sorted(k for k, p in self._links.items() if p.mode is not LinkMode.OPEN)

    # -- back to normal, and the end -------------------------------------------------------

    def restore_all(self, timeout: float = START_TIMEOUT) -> None:
        """Heal every link, set every clock right, repair every failed disk (its node
        restarted), resume every paused node, start every stopped one; then wait until all
        are ready."""
        self.heal_all()
        for clock in self._clocks.values():
            clock.step(-clock.offset)
        for node_id, disk in self._disks.items():
            if disk.switch.exists():
                disk.heal()
                self.node(node_id).stop()
        for node_id in self.node_ids:
            process = self.node(node_id)
            if process.paused:
                process.resume()
            if not process.alive():
                process.start(wait=False)
        self.wait_ready(timeout)

    def close(self) -> None:
        """Kill every node and end every proxy. Bounded; safe to call twice; raises after
        cleaning up everything it could when something would not end."""
        errors: list[str] = []
        for node_id in self.node_ids:
            try:
                self.node(node_id).kill()
            except Exception as exc:  # one stuck node must not leave the others running
                errors.append(f"node {node_id}: {exc!r}")
        self._close_links(errors)
        self._close_disks(errors)
        if errors:
            raise RuntimeError("LocalCluster.close: " + "; ".join(errors))

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- inside -------------------------------------------------------------------------

    def _close_disks(self, errors: list[str]) -> None:
        for node_id, disk in getattr(self, "_disks", {}).items():
            try:
                disk.stop()
            except Exception as exc:
                errors.append(f"disk of node {node_id}: {exc!r}")

    def _node(self, node_id: int) -> ClusterNode:
        if node_id not in self._nodes:
            raise KeyError(f"no node {node_id}; nodes are {self.node_ids}")
        return self._nodes[node_id]

    def _peer_address(self, a: int, b: int) -> str:
        if self.addressed:
            return self._gates[(b, "controller")].bootstrap
        link = self._links[(a, b)]
        assert isinstance(link, LinkProxy)
        return link.bootstrap

    def _directed(self, a: int, b: int) -> Link:
        if not self.addressed:
            raise RuntimeError("one-way and slow links need an addressed cluster")
        link = self._links[(a, b)] if (a, b) in self._links else None
        if not isinstance(link, Link):
            raise KeyError(f"no link {a} -> {b}")
        return link

    def _open_gates(self, specs: Sequence[NodeSpec], tap: Tap | None) -> LinkTable:
        """A gate in front of every listener; filled into self._proxies as they open, so
        the caller can close them when a later one fails."""
        table = LinkTable([s.node_id for s in specs])
        for spec in specs:
            ports = {"client": spec.client_port}
            if spec.voter:
                ports["controller"] = spec.controller_port
            for role, port in ports.items():
                gate = NodeGate(spec.node_id, port, table,
                                tap=tap if role == "controller" else None)
                self._proxies.append(gate)
                self._gates[(spec.node_id, role)] = gate
        return table

    def _gate_settings(self, spec: NodeSpec) -> dict[str, str]:
        """What an addressed node is told besides the rendered settings: advertise its gate,
        and open every connection from its own address."""
        gate = self._gates[(spec.node_id, "client")]
        return {"advertised.listeners": f"PLAINTEXT://{gate.bootstrap}",
                "outbound.source.address": spec.host}

    def _client_port(self, spec: NodeSpec) -> int:
        return self._gates[(spec.node_id, "client")].port if self.addressed else spec.client_port

    def _pair(self, a: int, b: int) -> list[LinkProxy]:
        if not self.proxied:
            raise RuntimeError("links can only be cut in a proxied cluster")
        self._node(a), self._node(b)
        pair = [self._links[k] for k in ((a, b), (b, a)) if k in self._links]
        if not pair:
            raise ValueError(f"nodes {a} and {b} share no controller link (neither is a voter)")
        return pair

    def _close_links(self, errors: list[str]) -> None:
        for proxy in self._proxies:
            try:
                proxy.close()
            except Exception as exc:
                errors.append(f"proxy {proxy.bootstrap}: {exc!r}")


def _plan(nodes: int, root: Path, racks: Sequence[str] | None, voter_count: int | None,
          addressed: bool) -> list[NodeSpec]:
    """Where each node listens: on free ports of 127.0.0.1, or (addressed) of its own
    address."""
    if not addressed:
        ports = free_ports(2 * nodes)
        return plan_nodes_on(list(zip(ports[::2], ports[1::2])), root, racks,
                             voter_count=voter_count)
    pairs = [tuple(free_ports(2, node_address(i))) for i in range(1, nodes + 1)]
    specs = plan_nodes_on(pairs, root, racks, voter_count=voter_count)
    return [dataclasses.replace(s, host=node_address(s.node_id)) for s in specs]


def _link_proxies(specs: Sequence[NodeSpec], opened: list[LinkProxy | NodeGate],
                  tap: Tap | None = None) -> dict[tuple[int, int], LinkProxy]:
    """One proxy per directed link to a voter; appended to `opened` as it goes, so the
    caller can close the ones already running when a later one fails."""
    made: dict[tuple[int, int], LinkProxy] = {}
    for a in specs:
        for b in specs:
            if a.node_id != b.node_id and b.voter:
                proxy = LinkProxy(b.host, b.controller_port, name=f"{a.node_id}->{b.node_id}",
                                  tap=tap)
                opened.append(proxy)
                made[(a.node_id, b.node_id)] = proxy
    return made


# -- asking the cluster, as a client would (tests and bench/ share these) ------------------


def live_brokers(address: str, timeout: float = 5.0) -> int:
    """How many brokers DescribeCluster through `address` names; 0 while nothing answers."""
    async def ask() -> int:
        async with AdminClient(address, timeout=timeout) as admin:
            return len((await admin.describe_cluster()).brokers)
    try:
        return asyncio.run(ask())
    except Exception:  # not answering yet
        return 0


def describe_quorum(address: str, timeout: float = 10.0) -> Any:
    """DescribeQuorum's answer through `address`; None while nothing answers."""
    async def ask() -> Any:
        async with AdminClient(address, timeout=timeout) as admin:
            return await admin.describe_quorum()
    try:
        return asyncio.run(ask())
    except Exception:  # not answering, or no leader to relay to yet
        return None


def metadata_error(address: str, topic: str, auto_create: bool = False,
                   timeout: float = 10.0) -> int:
    """The error code of Metadata v7 about `topic` from the node at `address`; with
    `auto_create`, the question a producer asks (allow_auto_topic_creation)."""
    async def ask() -> int:
        async with AdminClient(address, timeout=timeout) as admin:
            resp = await admin.request(3, 7, {"topics": [{"name": topic}],
                                              "allow_auto_topic_creation": auto_create})
            return int(resp.topics[0].error_code)
    return asyncio.run(ask())
