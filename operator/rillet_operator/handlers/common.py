"""What both handlers share: the API wrapper, the clock, status writing, per-object locks."""
from __future__ import annotations

import asyncio
import datetime
from typing import Any

import kopf

from .. import conditions
from ..kube import Kube

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


def lock(memo: Any) -> asyncio.Lock:
    """One reconcile at a time per object: change handlers and timers run concurrently."""
    if "lock" not in memo:
        memo["lock"] = asyncio.Lock()
    return memo["lock"]


def write_outcome(patch: kopf.Patch, status: dict, outcome: conditions.Outcome,
                  generation: int, body: Any, logger: Any) -> None:
    """Conditions into the status patch; an Event when Ready's reason changes."""
    old = conditions.get(status.get("conditions") or [], conditions.READY) or {}
    patch.status["conditions"] = conditions.apply_outcome(status.get("conditions") or [],
                                                          outcome, now(), generation)
    patch.status["observedGeneration"] = generation
    if old.get("reason") != outcome.reason:
        if outcome.ready:
            kopf.info(body, reason=outcome.reason, message=outcome.message)
        elif outcome.error:
            kopf.warn(body, reason=outcome.reason, message=outcome.message)
        else:
            kopf.info(body, reason=outcome.reason, message=outcome.message)
        logger.info("%s: %s", outcome.reason, outcome.message)


def replacing(old: Any, new: Any) -> Any:
    """A merge-patch value that leaves exactly `new`: status patches are JSON merge patches,
    which merge objects key by key, so keys of `old` missing from `new` are sent as null."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return new
    out = {k: replacing(old.get(k), v) for k, v in new.items()}
    out.update({k: None for k in old if k not in new})
    return out
