"""A seeded, deterministic simulation of a Raft quorum, checking safety after every step.

Everything random comes from one `random.Random(seed)`, so a failing seed is
replayed exactly: `python -m rillet.raft.sim --seed N -v`. The network loses,
duplicates, delays and reorders messages and can be partitioned; nodes crash
(losing whatever was not flushed; the quorum state is persisted before any
effect that follows it, as the real shell does) and restart; clients propose
entries to whoever leads; nodes compact their committed prefix into snapshots.

Checked after every step (SafetyViolation names the seed and the step):
- election safety: at most one leader per epoch;
- log matching: two logs with an entry of the same epoch at an offset agree
  on everything up to it;
- committed entries are never lost or changed: every node's committed prefix
  agrees with every other's, and a leader of epoch E holds every entry
  committed before E (leader completeness);
- state machine safety follows (an applied prefix is a committed prefix).
After the faults, the network heals and all nodes restart: a leader must be
elected and a new entry committed on every node within a bounded time.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from . import messages as m
from .core import RaftCore
from .log import MemoryLog
from .roles import RaftTiming

TIMING = RaftTiming(election_timeout_ms=300, fetch_timeout_ms=600, request_timeout_ms=200,
                    max_fetch=8)


class SafetyViolation(AssertionError):
    pass


@dataclass
class SimNode:
    node_id: int
    log: MemoryLog = field(default_factory=MemoryLog)
    persisted: m.QuorumStateData = field(default_factory=m.QuorumStateData)
    core: RaftCore | None = None

    @property
    def alive(self) -> bool:
        return self.core is not None


@dataclass(order=True)
class InFlight:
    deliver_ms: int
    seq: int
    src: int = field(compare=False)
    dst: int = field(compare=False)
    message: Any = field(compare=False)
    is_response: bool = field(compare=False, default=False)


@dataclass
class SimConfig:
    voters: int = 3
    observers: int = 0
    steps: int = 400
    drop: float = 0.05
    duplicate: float = 0.03
    crash: float = 0.01
    partition: float = 0.01
    snapshot: float = 0.01
    propose: float = 0.15
    max_delay_ms: int = 60
    settle_ms: int = 20000


class Simulation:
    def __init__(self, seed: int, config: SimConfig = SimConfig()) -> None:
        self.seed = seed
        self.config = config
        self.rng = random.Random(seed)
        self.now = 0
        self.seq = 0
        self.step_no = 0
        voter_ids = list(range(1, config.voters + 1))
        self.voters = frozenset(voter_ids)
        ids = voter_ids + list(range(100, 100 + config.observers))
        self.nodes = {i: SimNode(i) for i in ids}
        self.network: list[InFlight] = []
        self.cut: set[frozenset[int]] = set()
        self.leaders_by_epoch: dict[int, int] = {}
        self.committed: list[Any] = []
        self.commit_epochs: list[int] = []
        self.proposed = 0
        self.trace: list[str] = []
        for node in self.nodes.values():
            self._boot(node)

    # -- node lifecycle ------------------------------------------------------------

    def _boot(self, node: SimNode) -> None:
        node.core = RaftCore(node.node_id, self.voters, node.log, node.persisted, self.now,
                             random.Random(self.rng.getrandbits(32)), TIMING)

    def _crash(self, node: SimNode) -> None:
        self._note(f"crash {node.node_id}")
        node.core = None
        node.log.crash()

    # -- effects -------------------------------------------------------------------

    def _run(self, node: SimNode, effects: list[m.Effect]) -> None:
        for effect in effects:
            if not node.alive:
                return
            if isinstance(effect, m.Persist):
                node.persisted = effect.state
            elif isinstance(effect, m.Send):
                self._send(node.node_id, effect.to, effect.message, False)
            elif isinstance(effect, m.Flush):
                self._send(node.node_id, node.node_id, ("flush",), False)
            elif isinstance(effect, m.LoadSnapshot):
                self._send(node.node_id, node.node_id, ("snapshot", effect), False)

    def _send(self, src: int, dst: int, message: Any, is_response: bool) -> None:
        self.seq += 1
        delay = self.rng.randrange(1, self.config.max_delay_ms)
        self.network.append(InFlight(self.now + delay, self.seq, src, dst, message, is_response))

    def _linked(self, a: int, b: int) -> bool:
        return a == b or frozenset((a, b)) not in self.cut

    def _deliver(self, msg: InFlight) -> None:
        node = self.nodes[msg.dst]
        core = node.core
        if core is None or not self._linked(msg.src, msg.dst):
            return
        if isinstance(msg.message, tuple):
            self._local(node, msg.message)
        elif msg.is_response:
            self._run(node, core.step(msg.message, self.now, sender=msg.src))
        else:
            response, effects = core.handle_request(msg.src, msg.message, self.now)
            self._run(node, effects)
            if node.alive:
                self._send(msg.dst, msg.src, response, True)

    def _local(self, node: SimNode, work: tuple[Any, ...]) -> None:
        assert node.core is not None
        if work[0] == "flush":
            end = node.log.flush()
            self._run(node, node.core.step(m.Flushed(end), self.now))
            return
        load: m.LoadSnapshot = work[1]
        source = self.nodes[load.leader_id]
        snap = source.log.snapshot() if source.alive else None
        if snap is None or snap != (load.end_offset, load.epoch) or \
                not self._linked(node.node_id, source.node_id):
            self._run(node, node.core.step(m.SnapshotLoaded(-1, -1), self.now))
            return
        payloads = source.log.snapshot_payloads
        node.log.install_snapshot(load.end_offset, load.epoch, payloads)
        self._note(f"node {node.node_id} installed snapshot at {load.end_offset}")
        self._run(node, node.core.step(m.SnapshotLoaded(load.end_offset, load.epoch), self.now))

    # -- the fault schedule ----------------------------------------------------------

    def step(self, faults: bool = True) -> None:
        self.step_no += 1
        rng, cfg = self.rng, self.config
        roll = rng.random()
        if faults and roll < cfg.crash:
            self._fault_crash()
        elif faults and roll < cfg.crash + cfg.partition:
            self._fault_partition()
        elif roll < cfg.crash + cfg.partition + cfg.snapshot:
            self._snapshot()
        elif roll < cfg.crash + cfg.partition + cfg.snapshot + cfg.propose:
            self._propose()
        else:
            self._advance(faults)
        self.check()

    def _fault_crash(self) -> None:
        node = self.nodes[self.rng.choice(sorted(self.nodes))]
        if node.alive:
            self._crash(node)
        else:
            self._note(f"restart {node.node_id}")
            self._boot(node)

    def _fault_partition(self) -> None:
        if self.cut and self.rng.random() < 0.5:
            self._note("heal all links")
            self.cut.clear()
            return
        a, b = self.rng.sample(sorted(self.nodes), 2)
        self._note(f"cut {a}<->{b}")
        self.cut.add(frozenset((a, b)))

    def _snapshot(self) -> None:
        node = self.nodes[self.rng.choice(sorted(self.nodes))]
        if node.core is None:
            return
        hw = min(node.core.high_watermark, node.log.flushed)
        if hw > node.log.start_offset:
            node.log.take_snapshot(hw)
            self._note(f"node {node.node_id} snapshot at {hw}")

    def _propose(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        assert node.core is not None
        self.proposed += 1
        payload = ("v", node.node_id, self.proposed)
        _, effects = node.core.propose([payload], self.now)
        self._run(node, effects)

    def _advance(self, faults: bool) -> None:
        """Deliver one message that is due (any of them: reordering), or let time pass."""
        due = [msg for msg in self.network if msg.deliver_ms <= self.now]
        if due:
            msg = self.rng.choice(due)
            self.network.remove(msg)
            local = msg.src == msg.dst   # a node's own disk work is never lost
            if faults and not local and self.rng.random() < self.config.drop:
                return
            if faults and not local and self.rng.random() < self.config.duplicate:
                self.network.append(InFlight(self.now + 5, self._next_seq(), msg.src, msg.dst,
                                             msg.message, msg.is_response))
            self._deliver(msg)
            return
        self.now += self.rng.randrange(1, 50)
        for node in self.nodes.values():
            if node.core is not None:
                self._run(node, node.core.step(m.Tick(), self.now))

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    # -- safety ----------------------------------------------------------------------

    def check(self) -> None:
        alive = [n for n in self.nodes.values() if n.core is not None]
        for node in alive:
            assert node.core is not None
            if node.core.is_leader:
                known = self.leaders_by_epoch.setdefault(node.core.epoch, node.node_id)
                if known != node.node_id:
                    self._fail(f"two leaders in epoch {node.core.epoch}: {known} and "
                               f"{node.node_id}")
        for node in alive:
            self._check_committed(node)
        for node in alive:
            assert node.core is not None
            if node.core.is_leader:
                # Leader completeness: whatever earlier epochs committed, this leader has.
                earlier = [e for e, at in zip(self.committed, self.commit_epochs)
                           if at < node.core.epoch]
                held = node.log.payloads()[:len(earlier)]
                if held != earlier:
                    self._fail(f"leader {node.node_id} (epoch {node.core.epoch}) lacks "
                               f"committed entries: has {held}, committed {self.committed}")
        for i, a in enumerate(alive):
            for b in alive[i + 1:]:
                self._check_matching(a, b)

    def _check_committed(self, node: SimNode) -> None:
        assert node.core is not None
        hw = node.core.high_watermark
        if hw > node.log.end_offset:
            self._fail(f"node {node.node_id} high watermark {hw} beyond its log end "
                       f"{node.log.end_offset}")
        prefix = node.log.payloads()[:hw]
        common = min(len(prefix), len(self.committed))
        if prefix[:common] != self.committed[:common]:
            self._fail(f"node {node.node_id} committed {prefix} but the cluster committed "
                       f"{self.committed}")
        if len(prefix) > len(self.committed):
            # The committing leader's own entry ends the prefix: its epoch is when the
            # new entries became committed (they may be from earlier epochs).
            self.commit_epochs += [prefix[-1].epoch] * (len(prefix) - len(self.committed))
            self.committed = prefix

    def _check_matching(self, a: SimNode, b: SimNode) -> None:
        la, lb = a.log, b.log
        lo = max(la.start_offset, lb.start_offset)
        hi = min(la.end_offset, lb.end_offset)
        last_same = -1
        for off in range(hi - 1, lo - 1, -1):
            if la.epoch_at(off) == lb.epoch_at(off):
                last_same = off
                break
        for off in range(lo, last_same + 1):
            ea, eb = la.entries[off - la.base], lb.entries[off - lb.base]
            if ea != eb:
                self._fail(f"logs of {a.node_id} and {b.node_id} differ at {off} "
                           f"({ea} vs {eb}) below a common epoch at {last_same}")

    def _fail(self, what: str) -> None:
        tail = "\n".join(self.trace[-15:])
        raise SafetyViolation(f"seed {self.seed}, step {self.step_no}, t={self.now}ms: {what}"
                              f"\nlast events:\n{tail}\nnodes:\n{self.describe()}")

    def describe(self) -> str:
        lines = []
        for node in self.nodes.values():
            core = node.core
            state = "down" if core is None else (
                f"{core.role} epoch {core.epoch} leader {core.leader_id} voted "
                f"{core.voted_for} hw {core.high_watermark} {core._role}")
            lines.append(f"  {node.node_id}: log [{node.log.start_offset}, "
                         f"{node.log.end_offset}) flushed {node.log.flushed} {state}")
        return "\n".join(lines)

    def _note(self, text: str) -> None:
        self.trace.append(f"[{self.step_no} t={self.now}] {text}")

    # -- liveness after the storm -------------------------------------------------------

    def settle(self) -> None:
        """Heal, restart everyone, and require a new entry committed everywhere."""
        self.cut.clear()
        for node in self.nodes.values():
            if not node.alive:
                self._boot(node)
        deadline = self.now + self.config.settle_ms
        marker = ("settled", self.seed)
        while self.now < deadline:
            self._advance(False)
            self.check()
            for node in self.nodes.values():
                # A leader deposed before committing it may have lost the marker: ask again.
                if node.core is not None and node.core.is_leader \
                        and marker not in [e.payload for e in node.log.payloads()]:
                    _, effects = node.core.propose([marker], self.now)
                    self._run(node, effects)
            if all(marker in [e.payload for e in n.log.payloads()[:n.core.high_watermark]]
                   for n in self.nodes.values() if n.core is not None):
                return
        self._fail(f"no entry committed on every node within {self.config.settle_ms} ms "
                   "after healing")

    def run(self) -> "Simulation":
        for _ in range(self.config.steps):
            self.step()
        self.settle()
        return self


def run_seeds(seeds: range, config: SimConfig = SimConfig()) -> int:
    """Run every seed; raises SafetyViolation at the first failure. Returns entries committed."""
    total = 0
    for seed in seeds:
        total += len(Simulation(seed, config).run().committed)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rillet.raft.sim",
                                     description="deterministic Raft simulation")
    parser.add_argument("--seed", type=int, help="replay one seed")
    parser.add_argument("--seeds", type=int, default=1000, help="run seeds 0..N-1")
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("-v", action="store_true", help="print the event trace")
    args = parser.parse_args(argv)
    config = SimConfig(voters=args.voters, observers=args.observers, steps=args.steps)
    seeds = range(args.seed, args.seed + 1) if args.seed is not None else range(args.seeds)
    started = time.monotonic()
    for seed in seeds:
        sim = Simulation(seed, config)
        try:
            sim.run()
        except SafetyViolation as exc:
            print(exc, file=sys.stderr)
            return 1
        if args.v:
            print("\n".join(sim.trace))
    print(f"{len(seeds)} seeds, {config.voters} voters, {config.steps} steps each: safe "
          f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
