"""/readyz decisions and the broker-state gauge, from lifecycle views."""
from __future__ import annotations

from dataclasses import replace

import pytest

from rillet.readiness import NOT_STARTED, LifecycleView, broker_state, readiness

SERVING = LifecycleView(started=True, registered=True, fenced=False, caught_up=True,
                        heartbeat_age_s=0.5, shutting_down=False)
SESSION_S = 9.0


@pytest.mark.parametrize("view,reason", [
    (NOT_STARTED, "starting"),
    (replace(SERVING, registered=False, heartbeat_age_s=None), "not_registered"),
    (replace(SERVING, fenced=True, heartbeat_age_s=None), "fenced"),  # no answer yet
    (replace(SERVING, fenced=True), "fenced"),
    (replace(SERVING, caught_up=False), "not_caught_up"),
    (replace(SERVING, heartbeat_age_s=SESSION_S + 0.1), "controller_unreachable"),
    (replace(SERVING, shutting_down=True), "shutting_down"),
])
def test_not_ready(view: LifecycleView, reason: str):
    r = readiness(view, SESSION_S)
    assert not r.ready and r.reason == reason
    assert r.as_json() == {"ready": False, "reason": reason}


def test_ready_when_registered_unfenced_caught_up_and_in_touch():
    r = readiness(SERVING, SESSION_S)
    assert r.ready and r.as_json() == {"ready": True}
    assert readiness(replace(SERVING, heartbeat_age_s=SESSION_S), SESSION_S).ready


def test_broker_state():
    assert broker_state(NOT_STARTED) == "starting"
    assert broker_state(replace(SERVING, fenced=True)) == "fenced"
    assert broker_state(SERVING) == "unfenced"
    assert broker_state(replace(SERVING, shutting_down=True)) == "shutting_down"
