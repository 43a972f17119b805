"""The operator's logging: the level the chart's `logLevel` names, one line per decision.

Kopf's command line knows three levels (`--verbose` = DEBUG, none = INFO, `--quiet` =
WARNING); the chart passes `RILLET_LOG_LEVEL` as well, which also says ERROR. At INFO:

- Kopf logs "Timer 'topic_timer' succeeded." (every interval, per object) and "Handler ...
  succeeded." / "Creation is processed: ..." after each handler run; those say nothing a user
  acts on, so `RoutineFilter` drops them (they stay at DEBUG);
- urllib3, pykube, kubernetes, asyncio and Kopf's own machinery log at WARNING and above;
  Kopf's per-object logger (what the handlers say) and its peering (which replica is active)
  keep INFO;
- every line about a resource starts with `[Kind namespace/name]`, so
  `kubectl logs ... | grep 'Cluster prod/events'` gives one resource's story.
"""
from __future__ import annotations

import logging
import os
import re

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Libraries whose INFO/DEBUG lines are about HTTP connections and the event loop.
QUIET_LIBRARIES = ("urllib3", "pykube", "kubernetes", "asyncio", "aiohttp", "kopf")
# Kopf loggers that carry decisions: the handlers' own lines and the peering hand-over.
KOPF_DECISIONS = ("kopf.objects", "kopf._core.engines.peering")
# Kopf's per-run bookkeeping at INFO: "Timer 'x' succeeded.", "Handler 'x' succeeded.",
# "Creation is processed: 1 succeeded; 0 failed.", "... is superseded by ...".
_ROUTINE = re.compile(r"^(?:(?:Handler|Timer|Daemon|Activity) '[^']*' succeeded\.$"
                      r"|\w+ is processed: |\w+ is superseded by )")


def level_from(value: str | None, default: str = "INFO") -> int:
    """A level name (any case) as a logging level; unknown or empty: `default`."""
    name = (value or "").strip().upper()
    return getattr(logging, name if name in LEVELS else default)


def is_routine(record: logging.LogRecord) -> bool:
    return record.levelno == logging.INFO and bool(_ROUTINE.match(str(record.msg)))


class RoutineFilter(logging.Filter):
    """Drops Kopf's per-run success lines unless the operator runs at DEBUG. On the
    `kopf.objects` logger, so the dropped lines reach neither the log nor Kubernetes Events."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return self.level <= logging.DEBUG or not is_routine(record)


class ResourceFormatter(logging.Formatter):
    """`[time] LEVEL [Kind namespace/name] message` for lines about a resource (Kopf puts the
    reference in `record.k8s_ref`), `[time] LEVEL logger: message` for the rest."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(levelname)-7s %(where)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.where = where(record)
        return super().format(record)


def where(record: logging.LogRecord) -> str:
    ref = getattr(record, "k8s_ref", None)
    if not ref:
        return f"{record.name}:"
    name = f"{ref['namespace']}/{ref.get('name')}" if ref.get("namespace") else ref.get("name")
    return f"[{ref.get('kind') or 'object'} {name}]"


def configure(level: int, root: logging.Logger | None = None) -> None:
    """Sets the levels above, the routine filter, and (for Kopf's plain-text handlers) the
    resource formatter. Called once at start-up, after Kopf set up its own handler."""
    root = root or logging.getLogger()
    root.setLevel(level)
    quiet = logging.DEBUG if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(quiet)
    for name in KOPF_DECISIONS:
        logging.getLogger(name).setLevel(level)
    objects = logging.getLogger("kopf.objects")
    objects.filters = [f for f in objects.filters if not isinstance(f, RoutineFilter)]
    objects.addFilter(RoutineFilter(level))
    for handler in root.handlers:
        # Kopf's JSON formatter (--log-format=json) carries the reference as a field already.
        if type(handler.formatter).__name__.endswith("TextFormatter"):
            handler.setFormatter(ResourceFormatter())


def configure_from_env(environ: dict[str, str] | None = None) -> int:
    """RILLET_LOG_LEVEL when set; otherwise the level Kopf's flags gave the root logger."""
    env = os.environ if environ is None else environ
    raw = env.get("RILLET_LOG_LEVEL")
    level = level_from(raw) if raw else logging.getLogger().getEffectiveLevel()
    configure(level)
    return level
