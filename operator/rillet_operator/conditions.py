"""Status conditions, as Kubernetes conventions want them: Ready says whether the resource
serves, and conditions beside it say what is under way (Reconciling, and for a Cluster Scaling
and RollingRestart, and CertificateRolloverWaiting naming the Users a CA rollover waits for) or
wrong (Error, ConfigWarning).

Ready stays True while a planned change runs on a cluster that serves (a scale-up, a rolling
restart, one broker restarting): its reason then names the change (ScalingUp, RollingRestart,
BrokersStarting), so `kubectl get rlc` shows READY True with the why. Ready turns False when
the resource does not serve or its spec cannot be carried out (refusals such as
ScaleDownUnsafe, InvalidConfig, PartitionDecreaseNotSupported), with Error True beside it.

Pure: the caller passes the time. lastTransitionTime moves only when a condition's status
changes, so `kubectl wait --for=condition=Ready` and printer columns see stable values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

READY, RECONCILING, ERROR = "Ready", "Reconciling", "Error"
SCALING, ROLLING_RESTART, CONFIG_WARNING = "Scaling", "RollingRestart", "ConfigWarning"
RECONCILIATION_PAUSED = "ReconciliationPaused"   # pause.py
STORAGE_RESIZE = "StorageResize"   # storage_growth.py: claims growing, or why they cannot
# rollover_users.py: the tls Users a CA rollover step waits for.
CERT_ROLLOVER_WAITING = "CertificateRolloverWaiting"
# The order conditions are listed in.
ORDER = (READY, RECONCILING, SCALING, ROLLING_RESTART, STORAGE_RESIZE, CERT_ROLLOVER_WAITING,
         ERROR, CONFIG_WARNING, RECONCILIATION_PAUSED)
# The conditions a Cluster always carries besides Ready, Reconciling and Error.
CLUSTER_TRACKED = (SCALING, ROLLING_RESTART, STORAGE_RESIZE, CONFIG_WARNING)


@dataclass(frozen=True)
class Step:
    """A planned change under way: its reason (ScalingUp, RollingRestart, ...) and progress."""
    reason: str
    message: str


@dataclass(frozen=True)
class Outcome:
    """What one reconcile found: serving or not, why, and what is still under way."""
    ready: bool
    reason: str
    message: str
    reconciling: bool = False
    error: bool = False
    scaling: Step | None = None          # a scale or rebalance in progress
    rolling: Step | None = None          # a rolling restart in progress
    warnings: tuple[str, ...] = field(default=())   # spec accepted, but worth a look
    # Other work waiting (e.g. the operator cannot reach the brokers for a step): Reconciling
    # names it, Ready keeps its own reason.
    pending: Step | None = None
    # spec.storage.size not (yet) what the claims have: growing, or refused and why.
    storage: Step | None = None

    @property
    def busy(self) -> bool:
        return self.reconciling or self.scaling is not None or self.rolling is not None \
            or self.pending is not None


def set_condition(conditions: Iterable[dict], type_: str, status: bool, reason: str,
                  message: str, now: str, generation: int | None = None) -> list[dict]:
    conditions = list(conditions)
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
    order = {t: i for i, t in enumerate(ORDER)}
    return sorted(out, key=lambda c: (order.get(c["type"], 99), c["type"]))


def apply_outcome(conditions: Iterable[dict], outcome: Outcome, now: str,
                  generation: int | None = None, tracked: tuple[str, ...] = ()) -> list[dict]:
    """The conditions after a reconcile with this outcome: Ready, Reconciling, Error, and the
    `tracked` ones (CLUSTER_TRACKED for a Cluster), each True or False every time."""
    conds = list(conditions)
    conds = set_condition(conds, READY, outcome.ready, outcome.reason, outcome.message, now,
                          generation)
    busy = _busy_step(outcome)
    conds = set_condition(conds, RECONCILING, busy is not None,
                          busy.reason if busy else "Idle", busy.message if busy else "", now,
                          generation)
    conds = set_condition(conds, ERROR, outcome.error,
                          outcome.reason if outcome.error else "NoError",
                          outcome.message if outcome.error else "", now, generation)
    for type_, step in ((SCALING, outcome.scaling), (ROLLING_RESTART, outcome.rolling),
                        (STORAGE_RESIZE, outcome.storage)):
        if type_ in tracked:
            conds = set_condition(conds, type_, step is not None,
                                  step.reason if step else "Idle",
                                  step.message if step else "", now, generation)
    if CONFIG_WARNING in tracked:
        conds = set_condition(conds, CONFIG_WARNING, bool(outcome.warnings),
                              "ConfigWarning" if outcome.warnings else "NoWarnings",
                              "; ".join(outcome.warnings), now, generation)
    return conds


def _busy_step(outcome: Outcome) -> Step | None:
    """What Reconciling names: a scale first, then a roll, then whatever else runs."""
    if outcome.scaling is not None:
        return outcome.scaling
    if outcome.rolling is not None:
        return outcome.rolling
    if outcome.pending is not None:
        return outcome.pending
    if outcome.reconciling:
        return Step(outcome.reason, outcome.message)
    return None


def get(conditions: Iterable[dict], type_: str) -> dict | None:
    return next((c for c in conditions or () if c.get("type") == type_), None)
