"""`rillet.io/pause-reconciliation: "true"` on a Cluster, Topic or User: the operator changes
nothing of it, as Strimzi's `strimzi.io/pause-reconciliation` (for manual repair, or to hold
a change back). Pure: the caller passes the time.

While paused, a pass only sets the condition ReconciliationPaused (True, reason
ReconciliationPaused, naming the annotation); every other condition and status field stays
as the last reconcile left it, so `kubectl get` still shows the last known state. Removing
the annotation (or any value but "true") resumes: the condition turns False (reason
ReconciliationResumed) and the pass reconciles as usual. A resource never paused carries no
such condition. Deleting a paused Topic or User lets it go without touching the cluster.
"""
from __future__ import annotations

from typing import Any, Mapping

from .conditions import RECONCILIATION_PAUSED, get, set_condition

PAUSE_ANNOTATION = "rillet.io/pause-reconciliation"


def is_paused(meta: Mapping[str, Any]) -> bool:
    value = (meta.get("annotations") or {}).get(PAUSE_ANNOTATION)
    return str(value).strip().lower() == "true"


def pause_conditions(conditions: list[dict] | None, paused: bool, now: str) -> list[dict] | None:
    """The conditions after this pass's look at the annotation, or None when nothing
    changes (never paused, or already shown as paused)."""
    conditions = list(conditions or [])
    held = get(conditions, RECONCILIATION_PAUSED)
    if paused:
        if held is not None and held.get("status") == "True":
            return None
        return set_condition(conditions, RECONCILIATION_PAUSED, True, "ReconciliationPaused",
                             f"annotation {PAUSE_ANNOTATION}=true: the operator changes "
                             f"nothing until it is removed", now)
    if held is None or held.get("status") != "True":
        return None
    return set_condition(conditions, RECONCILIATION_PAUSED, False, "ReconciliationResumed",
                         f"annotation {PAUSE_ANNOTATION} removed", now)
