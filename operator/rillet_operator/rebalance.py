"""A rebalance as a state machine kept in the Cluster's status: pure, no I/O, no clock.

`start` turns a plan (planner.py) into a state; each reconcile pass calls `step` with what the
cluster reports (Observed) and carries out the returned Actions. Everything needed to resume
is in the state, which round-trips through `to_status`/`from_status`, so an operator restarted
mid-move picks up where the cluster is:

- a partition is done when its replicas equal the plan's target, in order, no move of it is
  in flight, and every target replica is in the ISR;
- a partition is submitted at most once (`submitted` is written with the submission); at most
  `batch_size` submitted partitions are unfinished at a time;
- a submitted partition that is neither moving nor at its target for DIVERGED_STEPS passes
  ended elsewhere (refused, or changed by someone else): it counts as finished and is listed
  in `diverged`; the caller's own checks (e.g. drained brokers hold nothing) start a new plan
  if it matters;
- a target broker that is not live holds back the moves that need it; after
  BROKER_DOWN_STEPS passes in a row the rebalance fails, naming the broker;
- `replan` takes a new plan for a new broker set (a spec change mid-move): moves in flight
  continue unless they need a broker that is no longer a target, which are cancelled.

The whole state (thousands of partition names on a big cluster) lives in a ConfigMap owned by
the Cluster (`plan_config_map`); `status.rebalance` holds `summary(state)`: phase, counts,
bytes and the batch in flight, so `kubectl get rlc -o yaml` stays readable.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

Key = tuple[str, int]
Assignment = dict[Key, tuple[int, ...]]

ACTIVE = ("Planned", "Moving")
DIVERGED_STEPS = 3
BROKER_DOWN_STEPS = 30


def key_str(key: Key) -> str:
    return f"{key[0]}/{key[1]}"


def parse_key(text: str) -> Key:
    topic, partition = text.rsplit("/", 1)
    return topic, int(partition)


@dataclass(frozen=True)
class Observed:
    assignment: Mapping[Key, tuple[int, ...]]     # current replicas (Metadata)
    ongoing: Mapping[Key, tuple[int, ...]]        # partition -> target of a move in flight
    isr: Mapping[Key, tuple[int, ...]]
    sizes: Mapping[Key, int]                       # bytes (largest replica)
    live_brokers: frozenset[int]


@dataclass(frozen=True)
class Actions:
    submit: Assignment = field(default_factory=dict)
    cancel: tuple[Key, ...] = ()
    throttle: bool = False
    clear_throttle: bool = False


@dataclass
class RebalanceState:
    phase: str = "Idle"              # Idle | Planned | Moving | Done | Failed
    goal: str = ""                   # scale-up | scale-down | rebalance
    reason: str = ""
    target_brokers: list[int] = field(default_factory=list)
    plan: dict[str, list[int]] = field(default_factory=dict)
    copies: list[str] = field(default_factory=list)   # plan keys whose replica set changes
    submitted: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    waiting: dict[str, int] = field(default_factory=dict)   # submitted key -> passes unseen
    broker_down_steps: int = 0
    total: int = 0
    replica_moves: int = 0           # brokers added to replica sets by the plan
    minimum_moves: int = 0           # the rack-blind lower bound, for comparison
    bytes_total: int = 0
    bytes_moved: int = 0
    started_at: str = ""
    finished_at: str = ""

    _FIELDS = (("phase", "phase"), ("goal", "goal"), ("reason", "reason"),
               ("target_brokers", "targetBrokers"), ("plan", "plan"), ("copies", "copies"),
               ("submitted", "submitted"), ("done", "done"), ("diverged", "diverged"),
               ("waiting", "waiting"), ("broker_down_steps", "brokerDownSteps"),
               ("total", "total"), ("replica_moves", "replicaMoves"),
               ("minimum_moves", "minimumMoves"), ("bytes_total", "bytesTotal"),
               ("bytes_moved", "bytesMoved"), ("started_at", "startedAt"),
               ("finished_at", "finishedAt"))

    def to_status(self) -> dict[str, Any]:
        return {name: _copy(getattr(self, attr)) for attr, name in self._FIELDS}

    @classmethod
    def from_status(cls, raw: Mapping[str, Any] | None) -> "RebalanceState":
        state = cls()
        for attr, name in cls._FIELDS:
            if raw and raw.get(name) is not None:
                setattr(state, attr, _copy(raw[name]))
        return state


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def start(goal: str, target_brokers: list[int], plan: Mapping[Key, tuple[int, ...]],
          observed: Observed, now: str, replica_moves: int = 0,
          minimum_moves: int = 0) -> RebalanceState:
    copies = [key_str(k) for k, target in plan.items()
              if set(target) != set(observed.assignment.get(k, ()))]
    state = RebalanceState(
        phase="Planned" if plan else "Done", goal=goal, target_brokers=sorted(target_brokers),
        plan={key_str(k): list(v) for k, v in plan.items()}, copies=copies, total=len(plan),
        replica_moves=replica_moves, minimum_moves=minimum_moves,
        bytes_total=sum(observed.sizes.get(parse_key(k), 0) for k in copies),
        started_at=now, finished_at="" if plan else now)
    return state


def _finished(key: Key, target: tuple[int, ...], observed: Observed) -> bool:
    return (tuple(observed.assignment.get(key, ())) == target and key not in observed.ongoing
            and set(target) <= set(observed.isr.get(key, ())))


def step(state: RebalanceState, observed: Observed, *, batch_size: int,
         now: str) -> tuple[RebalanceState, Actions]:
    if state.phase not in ACTIVE:
        return state, Actions()
    first = state.phase == "Planned"
    state.phase = "Moving"
    _account(state, observed)
    if len(state.done) == state.total:
        return _end(state, "Done", "", now), Actions(clear_throttle=True)

    down = sorted({b for k, t in state.plan.items() if k not in state.done for b in t}
                  - set(observed.live_brokers))
    state.broker_down_steps = state.broker_down_steps + 1 if down else 0
    if state.broker_down_steps > BROKER_DOWN_STEPS:
        reason = (f"broker{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} "
                  f"not live for {state.broker_down_steps} passes; the moves onto "
                  f"{'them' if len(down) > 1 else 'it'} cannot finish")
        return _end(state, "Failed", reason, now), Actions(clear_throttle=True)

    in_flight = len(set(state.submitted) - set(state.done))
    submit: Assignment = {}
    for k, target in state.plan.items():
        if in_flight + len(submit) >= batch_size:
            break
        if k in state.submitted or k in state.done or set(target) & set(down):
            continue
        if parse_key(k) in observed.ongoing:
            # Already moving: submitted by a pass whose status write this one has not seen.
            state.submitted.append(k)
            in_flight += 1
            continue
        submit[parse_key(k)] = tuple(target)
    state.submitted += [key_str(k) for k in submit]
    return state, Actions(submit=submit, throttle=first and bool(state.copies))


def _account(state: RebalanceState, observed: Observed) -> None:
    """Marks finished partitions done (and their bytes moved) and counts the passes a
    submitted partition has been neither moving nor at its target."""
    done = set(state.done)
    for k, target in state.plan.items():
        if k in done:
            continue
        key = parse_key(k)
        if _finished(key, tuple(target), observed):
            _mark_done(state, k, observed)
        elif k in state.submitted and key not in observed.ongoing:
            state.waiting[k] = state.waiting.get(k, 0) + 1
            if state.waiting[k] >= DIVERGED_STEPS and tuple(
                    observed.assignment.get(key, ())) != tuple(target):
                state.diverged.append(k)
                _mark_done(state, k, observed)
        else:
            state.waiting.pop(k, None)


def _mark_done(state: RebalanceState, k: str, observed: Observed) -> None:
    state.done.append(k)
    state.waiting.pop(k, None)
    if k in state.copies:
        state.bytes_moved += observed.sizes.get(parse_key(k), 0)


def _end(state: RebalanceState, phase: str, reason: str, now: str) -> RebalanceState:
    state.phase, state.reason, state.finished_at = phase, reason, now
    state.waiting = {}
    return state


def replan(state: RebalanceState, target_brokers: list[int],
           plan: Mapping[Key, tuple[int, ...]], observed: Observed,
           now: str) -> tuple[RebalanceState, tuple[Key, ...]]:
    """A new broker set mid-move. Moves in flight that fit the new brokers keep going (they
    stay submitted and are not in the new plan again); the others are returned to cancel.
    `plan` must be computed from the assignment with in-flight targets in place."""
    targets = set(target_brokers)
    keep: dict[Key, tuple[int, ...]] = {}
    cancel: list[Key] = []
    for k in state.submitted:
        if k in state.done:
            continue
        key = parse_key(k)
        target = tuple(state.plan[k])
        if set(target) <= targets:
            keep[key] = target
        else:
            cancel.append(key)
    new_plan = {k: v for k, v in plan.items() if k not in keep}
    fresh = start(state.goal, target_brokers, {**keep, **new_plan}, observed, now)
    fresh.started_at = state.started_at or now
    fresh.submitted = [key_str(k) for k in keep]
    return fresh, tuple(cancel)


def progress(state: RebalanceState) -> str:
    moved = f"{_size(state.bytes_moved)} of {_size(state.bytes_total)}"
    if state.phase == "Done":
        return (f"{state.goal or 'rebalance'} done: {state.total} partitions, {moved} "
                f"moved" + (f" ({len(state.diverged)} ended elsewhere)" if state.diverged
                            else ""))
    if state.phase == "Failed":
        return f"{state.goal or 'rebalance'} failed: {state.reason}"
    return (f"{state.goal or 'rebalance'}: {len(state.done)}/{state.total} partitions done, "
            f"{len(set(state.submitted) - set(state.done))} moving, {moved}")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


STATE_KEY = "state.json"


def summary(state: RebalanceState, plan_name: str = "") -> dict[str, Any]:
    """What status.rebalance shows: the phase, counts, bytes and the partitions in flight
    (the current batch); the plan itself is in the ConfigMap `plan_name`."""
    moving = [k for k in state.submitted if k not in set(state.done)]
    out: dict[str, Any] = {
        "phase": state.phase, "goal": state.goal, "reason": state.reason,
        "targetBrokers": list(state.target_brokers), "total": state.total,
        "partitionsDone": len(state.done), "partitionsMoving": len(moving),
        "partitionsDiverged": len(state.diverged), "currentBatch": moving,
        "replicaMoves": state.replica_moves, "minimumMoves": state.minimum_moves,
        "bytesTotal": state.bytes_total, "bytesMoved": state.bytes_moved,
        "progress": progress(state), "startedAt": state.started_at,
        "finishedAt": state.finished_at}
    if plan_name:
        out["planConfigMap"] = plan_name
    return out


def plan_config_map(state: RebalanceState, name: str, namespace: str,
                    labels: Mapping[str, str]) -> dict[str, Any]:
    """The ConfigMap that keeps the whole state between passes (and for `kubectl get cm`)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "data": {STATE_KEY: json.dumps(state.to_status(), sort_keys=True, indent=1)}}


def load(config_map: Mapping[str, Any] | None, status: Mapping[str, Any] | None
         ) -> RebalanceState:
    """The state from its ConfigMap; without one, from status.rebalance (an operator before
    the ConfigMap kept everything there, and a summary alone restores phase and counts)."""
    text = ((config_map or {}).get("data") or {}).get(STATE_KEY)
    if text:
        return RebalanceState.from_status(json.loads(text))
    state = RebalanceState.from_status(status)
    if state.phase in ACTIVE and not state.plan:
        # A summary of a move whose ConfigMap was deleted: what was submitted is unknown, so
        # nothing is resubmitted; the caller's checks start a new plan where one is needed.
        state.phase, state.reason = "Failed", "the rebalance's plan (its ConfigMap) is gone"
    return state
