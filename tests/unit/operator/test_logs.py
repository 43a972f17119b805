"""The operator's logging: the chart's level honoured, no per-run Kopf lines at INFO, HTTP and
Kopf internals at WARNING, lines about a resource greppable by kind, namespace and name."""
from __future__ import annotations

import logging

import pytest

from rillet_operator import logs


def _record(msg: str, level: int = logging.INFO, name: str = "kopf.objects",
            ref: dict | None = None) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, None, None)
    if ref is not None:
        record.k8s_ref = ref
    return record


@pytest.mark.parametrize("value, level", [("INFO", logging.INFO), ("debug", logging.DEBUG),
                                          ("Warning", logging.WARNING), ("ERROR", logging.ERROR),
                                          ("", logging.INFO), ("loud", logging.INFO)])
def test_level_names(value, level):
    assert logs.level_from(value) == level


@pytest.mark.parametrize("msg", ["Timer 'topic_timer' succeeded.",
                                 "Handler 'cluster_changed' succeeded.",
                                 "Activity 'configure' succeeded.",
                                 "Creation is processed: 1 succeeded; 0 failed.",
                                 "Resuming is processed: 1 succeeded; 0 failed."])
def test_kopf_per_run_lines_are_routine(msg):
    assert logs.is_routine(_record(msg))
    assert not logs.RoutineFilter(logging.INFO).filter(_record(msg))
    assert logs.RoutineFilter(logging.DEBUG).filter(_record(msg))


@pytest.mark.parametrize("msg, level", [
    ("InvalidConfig: spec.config.no.such.key is not a rillet broker config", logging.WARNING),
    ("Handler 'cluster_changed' failed with an exception and will try again", logging.ERROR),
    ("created StatefulSet events-broker", logging.INFO),
    ("Timer 'topic_timer' succeeded.", logging.WARNING),   # not Kopf's INFO line: kept
])
def test_decisions_and_errors_are_kept(msg, level):
    record = _record(msg, level)
    assert not logs.is_routine(record) and logs.RoutineFilter(logging.INFO).filter(record)


def test_resource_lines_start_with_kind_namespace_and_name():
    fmt = logs.ResourceFormatter()
    line = fmt.format(_record("ScalingUp: 3 -> 5 brokers", ref={
        "kind": "Cluster", "namespace": "prod", "name": "events"}))
    assert "INFO    [Cluster prod/events] ScalingUp: 3 -> 5 brokers" in line
    assert "urllib3.connectionpool: hello" in fmt.format(_record("hello",
                                                                name="urllib3.connectionpool"))


@pytest.fixture
def restore_logging():
    names = ("", *logs.QUIET_LIBRARIES, *logs.KOPF_DECISIONS)
    saved = {n: logging.getLogger(n).level for n in names}
    objects = logging.getLogger("kopf.objects")
    filters = list(objects.filters)
    yield
    for n, level in saved.items():
        logging.getLogger(n).setLevel(level)
    objects.filters = filters


def _run(level: int) -> str:
    """Which of the kinds of line the issue saw pass their logger's level and filters after
    `configure(level)`."""
    logs.configure(level)
    emitted = []
    for name, lvl, msg in (("urllib3.connectionpool", logging.DEBUG, "GET /api 200"),
                           ("urllib3.connectionpool", logging.INFO, "reset connection"),
                           ("kopf._core.reactor.running", logging.INFO, "kopf internals"),
                           ("kopf.objects", logging.INFO, "Timer 'topic_timer' succeeded."),
                           ("kopf.objects", logging.INFO, "created Service events-brokers"),
                           ("kopf.objects", logging.DEBUG, "Handler 'x' is invoked."),
                           ("kopf.objects", logging.WARNING, "InvalidConfig: two keys"),
                           ("kopf._core.engines.peering", logging.INFO, "Pausing operations")):
        logger = logging.getLogger(name)
        if logger.isEnabledFor(lvl) and all(f.filter(_record(msg, lvl, name))
                                            for f in logger.filters):
            emitted.append(f"{logging.getLevelName(lvl)} {name} {msg}")
    return "\n".join(emitted)


def test_info_has_decisions_and_no_debug_nor_per_timer_lines(restore_logging):
    out = _run(logging.INFO)
    assert "DEBUG" not in out and "Timer 'topic_timer'" not in out
    assert "urllib3" not in out and "kopf internals" not in out
    assert "created Service events-brokers" in out and "InvalidConfig: two keys" in out
    assert "Pausing operations" in out


def test_debug_shows_everything(restore_logging):
    out = _run(logging.DEBUG)
    assert "GET /api 200" in out and "Timer 'topic_timer' succeeded." in out
    assert "Handler 'x' is invoked." in out


def test_error_level_keeps_errors_only(restore_logging):
    out = _run(logging.ERROR)
    assert out == ""


def test_env_level_wins_over_kopf_flags(restore_logging):
    logging.getLogger().setLevel(logging.DEBUG)   # what `kopf run --verbose` leaves
    assert logs.configure_from_env({"RILLET_LOG_LEVEL": "INFO"}) == logging.INFO
    assert logging.getLogger().level == logging.INFO
    assert logging.getLogger("urllib3").level == logging.WARNING
    logging.getLogger().setLevel(logging.WARNING)
    assert logs.configure_from_env({}) == logging.WARNING
