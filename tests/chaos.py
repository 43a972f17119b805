"""Bounded chaos against a LocalCluster: random faults, one at a time, each undone in turn.

    events = run_chaos(cluster, ChaosPlan(cycles=10, seconds=60, seed=7),
                       workload=produce_until, check=verify)

Each cycle picks one fault with a seeded random generator, holds it for a while, undoes it,
and lets the cluster settle:
- kill:    kill -9 a node, then start it again (waits until it is ready)
- stop:    SIGTERM a node, then start it again
- pause:   SIGSTOP a node, then SIGCONT
- cut:     cut the link between two nodes (refuse or blackhole), then heal it
- isolate: cut every link of one node, then heal them
- oneway:  (addressed clusters) hold or refuse what one node sends another, then heal
- slow:    (addressed clusters) delay what one node sends another, then heal
- clock:   (clusters with fake clocks) step one node's wall clock 10 minutes forward or
           back, then step it back (tests/clock_faults.py)
- disk:    (clusters with faulty disks) every write and fsync to one node's second log dir
           fails (EIO): the dir goes offline; then the disk is repaired and the node
           restarted, as Kafka needs (tests/faulty_fs.py)
On an addressed cluster (LocalCluster(addressed=True)) cut and isolate reach every link
between nodes, data too; otherwise only the controller links.
The run ends after `cycles` cycles or `seconds` seconds, whichever comes first (a fault being
held is cut short at the deadline; restarting a node may add its start-up time), and always
ends with every link healed and every node running and ready, even when a fault or the
workload fails. Only an interrupt (Ctrl-C, or SIGTERM to the script) skips that: it reached
the nodes too, and the caller's close() kills what is left.

Hooks, so a test can run a workload and a checker beside the faults:
- workload(stop): runs in a thread from the first fault on; `stop` is set once everything
  is restored; it must return soon after. An exception in it ends the chaos early and is
  raised by run_chaos.
- on_event(event): called with every action as it happens (after the fault is in place).
- check(): called once at the end, with the cluster restored and the workload finished.
- target(rng): the node a one-node fault (kill, stop, pause, isolate, clock) hits, chosen
  when the fault is injected; by default a random one. A test aims with it, e.g. at the
  node coordinating a transaction or leading a partition at that moment.

As a script (a throwaway cluster in a temp dir, or --data DIR, closed at the end):
    python -m tests.chaos --cycles 10 --seconds 60 --seed 7 [--nodes 3] [--faults kill,cut]
        [--controller-links-only]
It ends with a report: per fault type (kind/mode), the count injected (`fault_counts`).
"""
from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from tests.tcp_proxy import LinkMode

log = logging.getLogger("chaos")

FAULTS = ("kill", "stop", "pause", "cut", "isolate", "oneway", "slow", "clock", "disk")
LINK_FAULTS = ("cut", "isolate", "oneway", "slow")
ADDRESSED_FAULTS = ("oneway", "slow")   # one direction of a link: addressed clusters only
CUT_MODES = (LinkMode.REFUSE.value, LinkMode.BLACKHOLE.value)
SLOW_SECONDS = (0.05, 0.5)   # how long a slowed link holds each chunk (min, max)
CLOCK_STEPS = (600.0, -600.0)   # an NTP step of the wall clock, seconds
WORKLOAD_JOIN = 30.0


class FaultTarget(Protocol):
    """What chaos needs of a cluster: LocalCluster, or a fake in unit tests."""
    proxied: bool
    addressed: bool
    clocked: bool
    disked: bool

    @property
    def node_ids(self) -> list[int]: ...
    def kill_node(self, node_id: int) -> None: ...
    def stop_node(self, node_id: int) -> int | None: ...
    def start_node(self, node_id: int) -> object: ...
    def pause_node(self, node_id: int) -> None: ...
    def resume_node(self, node_id: int) -> None: ...
    def cut(self, a: int, b: int, mode: str) -> None: ...
    def heal(self, a: int, b: int) -> None: ...
    def isolate(self, node_id: int, mode: str) -> None: ...
    def heal_all(self) -> None: ...
    def cut_one_way(self, a: int, b: int, mode: str) -> None: ...
    def slow(self, a: int, b: int, seconds: float) -> None: ...
    def step_clock(self, node_id: int, seconds: float) -> None: ...
    def fail_disk(self, node_id: int) -> None: ...
    def repair_disk(self, node_id: int) -> None: ...
    def restore_all(self) -> None: ...


@dataclass(frozen=True)
class ChaosPlan:
    cycles: int
    seconds: float
    seed: int
    faults: tuple[str, ...] = FAULTS
    hold: tuple[float, float] = (0.5, 2.0)     # how long a fault stays, seconds (min, max)
    settle: tuple[float, float] = (0.2, 1.0)   # quiet time after undoing it

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown or not self.faults:
            raise ValueError(f"faults must be a non-empty subset of {FAULTS}, got {self.faults}")
        if self.cycles < 0 or self.seconds < 0:
            raise ValueError("cycles and seconds must be >= 0")
        for low, high in (self.hold, self.settle):
            if not 0 <= low <= high:
                raise ValueError(f"a duration range must be 0 <= min <= max, got {(low, high)}")


@dataclass(frozen=True)
class Fault:
    kind: str
    nodes: tuple[int, ...]
    mode: str | None = None   # for cut, isolate and oneway
    delay: float | None = None   # for slow, seconds
    step: float | None = None    # for clock, seconds

    def __str__(self) -> str:
        nodes = ("->" if self.kind in ADDRESSED_FAULTS else "<->").join(map(str, self.nodes))
        detail = self.mode or (f"{self.delay:.2f}s" if self.delay is not None else None) or (
            f"{self.step:+.0f}s" if self.step is not None else None)
        return f"{self.kind} {nodes}" + (f" ({detail})" if detail else "")

    @property
    def type(self) -> str:
        """What the report counts: the kind, and the mode of a cut."""
        if self.step is not None:
            return f"{self.kind}/{'forward' if self.step > 0 else 'back'}"
        return f"{self.kind}/{self.mode}" if self.mode else self.kind


@dataclass(frozen=True)
class ChaosEvent:
    cycle: int          # -1 for the final restore
    action: str         # inject, undo, restore
    fault: Fault | None
    at: float           # seconds since the run started

    def __str__(self) -> str:
        what = f"{self.action} {self.fault}" if self.fault else self.action
        return f"t={self.at:6.2f}s cycle {self.cycle}: {what}"


NodeTarget = Callable[[random.Random], int]


def pick_fault(rng: random.Random, node_ids: Sequence[int], faults: Sequence[str],
               proxied: bool, addressed: bool = False, clocked: bool = False,
               disked: bool = False, target: NodeTarget | None = None) -> Fault:
    """One random fault among those this cluster allows (link faults need proxies and two
    nodes, one-way ones an addressed cluster, clock steps fake clocks, disk faults faulty
    disks); `target` picks the node of a one-node fault."""
    allowed = [f for f in faults if (f not in LINK_FAULTS or (proxied and len(node_ids) > 1))
               and (f not in ADDRESSED_FAULTS or addressed) and (f != "clock" or clocked)
               and (f != "disk" or disked)]
    if not allowed:
        raise ValueError(f"none of {list(faults)} applies to this cluster")
    kind = rng.choice(allowed)
    if kind in ("cut", "oneway"):
        a, b = rng.sample(list(node_ids), 2)
        return Fault(kind, (a, b), rng.choice(CUT_MODES))
    if kind == "slow":
        a, b = rng.sample(list(node_ids), 2)
        return Fault(kind, (a, b), delay=round(rng.uniform(*SLOW_SECONDS), 3))
    node = target(rng) if target is not None else rng.choice(list(node_ids))
    if kind == "clock":
        return Fault(kind, (node,), step=rng.choice(CLOCK_STEPS))
    return Fault(kind, (node,), rng.choice(CUT_MODES) if kind == "isolate" else None)


def inject(cluster: FaultTarget, fault: Fault) -> None:
    node = fault.nodes[0]
    if fault.kind == "kill":
        cluster.kill_node(node)
    elif fault.kind == "stop":
        cluster.stop_node(node)
    elif fault.kind == "pause":
        cluster.pause_node(node)
    elif fault.kind == "cut":
        cluster.cut(node, fault.nodes[1], fault.mode or CUT_MODES[0])
    elif fault.kind == "isolate":
        cluster.isolate(node, fault.mode or CUT_MODES[0])
    elif fault.kind == "oneway":
        cluster.cut_one_way(node, fault.nodes[1], fault.mode or CUT_MODES[0])
    elif fault.kind == "slow":
        cluster.slow(node, fault.nodes[1], fault.delay or SLOW_SECONDS[0])
    elif fault.kind == "clock":
        cluster.step_clock(node, fault.step or CLOCK_STEPS[0])
    elif fault.kind == "disk":
        cluster.fail_disk(node)


def undo(cluster: FaultTarget, fault: Fault) -> None:
    node = fault.nodes[0]
    if fault.kind in ("kill", "stop"):
        cluster.start_node(node)
    elif fault.kind == "pause":
        cluster.resume_node(node)
    elif fault.kind in ("cut", "oneway", "slow"):
        cluster.heal(node, fault.nodes[1])
    elif fault.kind == "isolate":
        cluster.heal_all()
    elif fault.kind == "clock":
        cluster.step_clock(node, -(fault.step or CLOCK_STEPS[0]))
    elif fault.kind == "disk":
        cluster.repair_disk(node)


def fault_counts(events: Sequence[ChaosEvent]) -> dict[str, int]:
    """The report: per fault type (kind, or kind/mode), how many were injected."""
    counts: dict[str, int] = {}
    for event in events:
        if event.action == "inject" and event.fault is not None:
            counts[event.fault.type] = counts.get(event.fault.type, 0) + 1
    return dict(sorted(counts.items()))


def fault_report(events: Sequence[ChaosEvent]) -> str:
    counts = fault_counts(events)
    return (f"faults injected: {sum(counts.values())} ("
            + ", ".join(f"{kind} {n}" for kind, n in counts.items()) + ")")


@dataclass
class _Workload:
    """The workload thread and what it raised."""
    run: Callable[[threading.Event], None]
    stop: threading.Event
    failed: threading.Event
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._main, name="chaos-workload", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            self.run(self.stop)
        except BaseException as exc:
            self.error = exc
            self.failed.set()

    def finish(self, timeout: float) -> None:
        self.stop.set()
        if self.thread is None:
            return
        self.thread.join(timeout)
        if self.thread.is_alive():
            # Where it is stuck is the whole diagnosis of a hang: name the call.
            frame = sys._current_frames().get(self.thread.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"
            raise RuntimeError(f"chaos workload still running {timeout}s after it was stopped;"
                               f" its stack:\n{stack}")
        if self.error is not None:
            raise self.error


@dataclass
class _Run:
    """One chaos run in progress: its clock, its events, and what may end it early."""
    plan: ChaosPlan
    on_event: Callable[[ChaosEvent], None] | None
    target: NodeTarget | None = None
    started: float = field(default_factory=time.monotonic)
    events: list[ChaosEvent] = field(default_factory=list)
    abort: threading.Event = field(default_factory=threading.Event)

    def remaining(self) -> float:
        return self.plan.seconds - (time.monotonic() - self.started)

    def over(self) -> bool:
        return self.remaining() <= 0 or self.abort.is_set()

    def wait(self, span: tuple[float, float], rng: random.Random) -> None:
        """Let a fault (or the quiet after it) last a random while, never past the deadline;
        a failing workload cuts it short."""
        self.abort.wait(max(0.0, min(rng.uniform(*span), self.remaining())))

    def record(self, cycle: int, action: str, fault: Fault | None) -> None:
        event = ChaosEvent(cycle, action, fault, round(time.monotonic() - self.started, 3))
        self.events.append(event)
        log.info("chaos %s", event)
        if self.on_event is not None:
            self.on_event(event)


def run_chaos(cluster: FaultTarget, plan: ChaosPlan, *,
              workload: Callable[[threading.Event], None] | None = None,
              on_event: Callable[[ChaosEvent], None] | None = None,
              check: Callable[[], None] | None = None,
              workload_join: float = WORKLOAD_JOIN,
              target: NodeTarget | None = None) -> list[ChaosEvent]:
    """Run `plan` against `cluster`; the events, in order. See the module docstring."""
    rng = random.Random(plan.seed)
    run = _Run(plan, on_event, target)
    worker = _Workload(workload, threading.Event(), run.abort) if workload else None
    log.info("chaos: seed %d, at most %d cycles in %.1fs, faults %s", plan.seed, plan.cycles,
             plan.seconds, ",".join(plan.faults))
    try:
        if worker is not None:
            worker.start()
        _cycles(cluster, run, rng)
    except KeyboardInterrupt:
        # Ctrl-C (or SIGTERM to the script) reached the nodes too, as they share our process
        # group: there is nothing to restore, and the caller closes the cluster.
        if worker is not None:
            worker.stop.set()
        raise
    except BaseException:
        _restore(cluster, run, worker, workload_join)
        raise
    _restore(cluster, run, worker, workload_join)
    if check is not None:
        check()
    return run.events


def _cycles(cluster: FaultTarget, run: _Run, rng: random.Random) -> None:
    """Inject, hold, undo, settle; a failure midway leaves the undoing to _restore."""
    for cycle in range(run.plan.cycles):
        if run.over():
            return
        fault = pick_fault(rng, cluster.node_ids, run.plan.faults, cluster.proxied,
                           cluster.addressed, cluster.clocked, cluster.disked, run.target)
        inject(cluster, fault)
        run.record(cycle, "inject", fault)
        run.wait(run.plan.hold, rng)
        undo(cluster, fault)
        run.record(cycle, "undo", fault)
        run.wait(run.plan.settle, rng)


def _restore(cluster: FaultTarget, run: _Run, worker: _Workload | None,
             workload_join: float) -> None:
    """Every link healed, every node running; then the workload stopped."""
    try:
        cluster.restore_all()
        run.record(-1, "restore", None)
    finally:
        if worker is not None:
            worker.finish(workload_join)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    from tests.clock_faults import libfaketime
    from tests.cluster import LocalCluster
    from tests.faulty_fs import can_make_faulty_disks
    parser = argparse.ArgumentParser(prog="python -m tests.chaos",
                                     description="Bounded random faults against a local cluster.")
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated subset of {','.join(FAULTS)}")
    parser.add_argument("--controller-links-only", action="store_true",
                        help="proxy only the controller links (no per-node addresses, so no "
                             "data-link, one-way or slow faults)")
    parser.add_argument("--data", type=Path, default=None,
                        help="where the nodes keep data and logs (default: a new temp dir)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    plan = ChaosPlan(args.cycles, args.seconds, seed, tuple(args.faults.split(",")))
    # SIGTERM (e.g. from timeout(1)) unwinds like Ctrl-C, so the nodes are killed, not orphaned.
    signal.signal(signal.SIGTERM, _interrupt)
    data = args.data or Path(tempfile.mkdtemp(prefix="rillet-chaos-"))
    log.info("chaos: %d nodes, data and logs in %s", args.nodes, data)
    try:
        with LocalCluster(data, nodes=args.nodes, addressed=not args.controller_links_only,
                          fake_clocks=libfaketime() is not None,
                          faulty_disks=can_make_faulty_disks()) as cluster:
            cluster.start()
            events = run_chaos(cluster, plan)
    except KeyboardInterrupt as exc:
        log.info("chaos: interrupted (%s); every node killed, every proxy closed", exc)
        return 130
    log.info("chaos: done, %d actions, seed %d, every node restored; %s", len(events), seed,
             fault_report(events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
