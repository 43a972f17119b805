"""Status conditions (Ready, Reconciling, Error), as Kubernetes conventions want them.

Pure: the caller passes the time. lastTransitionTime moves only when a condition's status
changes, so `kubectl wait --for=condition=Ready` and printer columns see stable values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

READY, RECONCILING, ERROR = "Ready", "Reconciling", "Error"


@dataclass(frozen=True)
class Outcome:
    """What one reconcile found: ready or not, why, and whether work is still under way."""
    ready: bool
    reason: str
    message: str
    reconciling: bool = False
    error: bool = False


def set_condition(conditions: Iterable[dict], type_: str, status: bool, reason: str,
                  message: str, now: str, generation: int | None = None) -> list[dict]:
    out = [dict(c) for c in conditions if c.get("type") != type_]
    old = next((c for c in conditions if c.get("type") == type_), None)
    value = "True" if status else "False"
    since = old["lastTransitionTime"] if old and old.get("status") == value \
        and old.get("lastTransitionTime") else now
    cond = {"type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": since}
    if generation is not None:
        cond["observedGeneration"] = generation
    out.append(cond)
    order = {READY: 0, RECONCILING: 1, ERROR: 2}
    return sorted(out, key=lambda c: (order.get(c["type"], 9), c["type"]))


def apply_outcome(conditions: Iterable[dict], outcome: Outcome, now: str,
                  generation: int | None = None) -> list[dict]:
    """The three conditions after a reconcile with this outcome."""
    conds = list(conditions)
    conds = set_condition(conds, READY, outcome.ready, outcome.reason, outcome.message, now,
                          generation)
    conds = set_condition(conds, RECONCILING, outcome.reconciling,
                          outcome.reason if outcome.reconciling else "Idle",
                          outcome.message if outcome.reconciling else "", now, generation)
    conds = set_condition(conds, ERROR, outcome.error,
                          outcome.reason if outcome.error else "NoError",
                          outcome.message if outcome.error else "", now, generation)
    return conds


def get(conditions: Iterable[dict], type_: str) -> dict | None:
    return next((c for c in conditions or () if c.get("type") == type_), None)
