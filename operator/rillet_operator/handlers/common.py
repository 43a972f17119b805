"""What both handlers share: the API wrapper, the clock, status writing, per-object locks."""
from __future__ import annotations

import asyncio
import contextlib
import datetime
from typing import Any, AsyncIterator

import kopf

from .. import conditions
from ..kube import Kube
from ..pause import PAUSE_ANNOTATION, is_paused, pause_conditions

_kube: Kube | None = None


def kube() -> Kube:
    global _kube
    if _kube is None:
        _kube = Kube.from_env()
    return _kube


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_since(stamp: str | None) -> float | None:
    """Seconds since an API timestamp (e.g. deletionTimestamp); None without one."""
    if not stamp:
        return None
    t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    return (datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()


# How long a resource's deletion waits for an unreachable cluster before it lets go.
DELETE_GIVE_UP_S = 120.0


def retry_or_let_go(body: Any, meta: Any, cluster: str, what: str, exc: Exception) -> None:
    """A finalizer's clean-up in the cluster failed: retry (TemporaryError) until the
    resource has waited DELETE_GIVE_UP_S, then let it go with a warning, so that a cluster
    gone for good never holds a namespace's deletion."""
    since = seconds_since(meta.get("deletionTimestamp"))
    if since is not None and since > DELETE_GIVE_UP_S:
        kopf.warn(body, reason="DeleteAbandoned",
                  message=f"cluster {cluster} unreachable for {since:.0f} s: letting {what} "
                          f"go ({exc})")
        return
    raise kopf.TemporaryError(f"cannot clean up {what} in cluster {cluster} yet: {exc}",
                              delay=10)


def lock(memo: Any) -> asyncio.Lock:
    """One reconcile at a time per object: change handlers and timers run concurrently."""
    if "lock" not in memo:
        memo["lock"] = asyncio.Lock()
    return memo["lock"]


@contextlib.asynccontextmanager
async def one_pass(memo: Any, kind: str, name: str, namespace: str, status: Any,
                   patch: kopf.Patch) -> AsyncIterator[dict]:
    """One reconcile at a time per object, each starting from the status the last one wrote.

    Change handlers and timers run concurrently, and Kopf applies a handler's status patch
    only after the handler returns, after the lock is released; and a timer's body is as old
    as the last watch event. A pass that waited on the lock would start from the status before
    the previous pass's patch and write back what it read, undoing that pass (a rolling
    restart's order lost a restarted broker this way). So the status is read from the API
    server under the lock, and the pass's status patch is written before the lock is
    released; Kopf keeps only its own annotations to apply."""
    async with lock(memo):
        k = kube()
        obj = await asyncio.to_thread(k.get, kind, name, namespace)
        fresh = dict((obj.get("status") or {}) if obj is not None else status)
        try:
            yield fresh
        finally:
            written = patch.pop("status", None)
            if written and obj is not None:
                await asyncio.to_thread(k.patch, kind, name, {"status": written}, namespace,
                                        "status")


def paused_pass(patch: kopf.Patch, status: dict, meta: Any, body: Any, logger: Any) -> bool:
    """Whether this pass must change nothing (pause.py): the annotation is set. Shows the
    pause (or the resume) in the conditions, with an Event when it starts and ends; on a
    resume the pass carries on from those conditions."""
    paused = is_paused(meta)
    changed = pause_conditions(status.get("conditions"), paused, now())
    if changed is not None:
        status["conditions"] = changed
        patch.status["conditions"] = changed
        reason = "ReconciliationPaused" if paused else "ReconciliationResumed"
        kopf.info(body, reason=reason, message=f"annotation {PAUSE_ANNOTATION} "
                                               f"{'set' if paused else 'removed'}")
        logger.info("%s (annotation %s)", reason, PAUSE_ANNOTATION)
    return paused


def write_outcome(patch: kopf.Patch, status: dict, outcome: conditions.Outcome,
                  generation: int, body: Any, logger: Any, tracked: tuple[str, ...] = ()
                  ) -> None:
    """Conditions into the status patch. An Event and one log line when Ready's reason
    changes (not every pass): Warning for an error (a refusal, a failure), Normal otherwise;
    and a Warning Event when the config warnings change."""
    old_conds = status.get("conditions") or []
    old = conditions.get(old_conds, conditions.READY) or {}
    patch.status["conditions"] = conditions.apply_outcome(old_conds, outcome, now(), generation,
                                                          tracked)
    patch.status["observedGeneration"] = generation
    if old.get("reason") != outcome.reason:
        if outcome.error:
            kopf.warn(body, reason=outcome.reason, message=outcome.message)
            logger.warning("%s: %s", outcome.reason, outcome.message)
        else:
            kopf.info(body, reason=outcome.reason, message=outcome.message)
            logger.info("%s: %s", outcome.reason, outcome.message)
    if conditions.CONFIG_WARNING in tracked:
        was = (conditions.get(old_conds, conditions.CONFIG_WARNING) or {}).get("message") or ""
        text = "; ".join(outcome.warnings)
        if text and text != was:
            kopf.warn(body, reason=conditions.CONFIG_WARNING, message=text)
            logger.warning("%s: %s", conditions.CONFIG_WARNING, text)


def replacing(old: Any, new: Any) -> Any:
    """A merge-patch value that leaves exactly `new`: status patches are JSON merge patches,
    which merge objects key by key, so keys of `old` missing from `new` are sent as null."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return new
    out = {k: replacing(old.get(k), v) for k, v in new.items()}
    out.update({k: None for k in old if k not in new})
    return out
