"""Is this broker ready for clients? The decision behind GET /readyz (pure).

Ready = registered with the active controller, unfenced by it, caught up with the
metadata log (the controller's heartbeat answer says so), and still in touch with the
controller: a broker whose heartbeats have gone unanswered for longer than
broker.session.timeout.ms has been fenced by the controller (or will be), even if the
last answer it got said otherwise. A single-node broker is its own controller, so its
heartbeats never go unanswered and it is ready once unfenced.

Reasons, in the order they are checked (the operator's probes and people read them):
  shutting_down           a controlled shutdown has begun
  starting                the broker has not begun registering (storage, quorum, catch-up)
  not_registered          registration not accepted yet (no quorum, or no controller)
  controller_unreachable  no heartbeat answer within broker.session.timeout.ms
  fenced                  the controller says fenced
  not_caught_up           the controller says we have not applied the metadata up to our
                          registration yet
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LifecycleView:
    """What the broker's lifecycle knows at one moment (see lifecycle.BrokerLifecycle)."""
    started: bool                  # the lifecycle exists (catch-up done, registering)
    registered: bool               # a broker epoch was granted
    fenced: bool                   # per the controller's last heartbeat answer
    caught_up: bool                # per the controller's last heartbeat answer
    heartbeat_age_s: float | None  # since the last answered heartbeat; None: none yet
    shutting_down: bool


NOT_STARTED = LifecycleView(started=False, registered=False, fenced=True, caught_up=False,
                            heartbeat_age_s=None, shutting_down=False)


@dataclass(frozen=True)
class Readiness:
    """What /readyz answers: ready, or the reason it is not."""
    ready: bool
    reason: str = ""

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"ready": self.ready}
        if self.reason:
            out["reason"] = self.reason
        return out


def readiness(view: LifecycleView, session_timeout_s: float) -> Readiness:
    if view.shutting_down:
        return Readiness(False, "shutting_down")
    if not view.started:
        return Readiness(False, "starting")
    if not view.registered:
        return Readiness(False, "not_registered")
    if view.heartbeat_age_s is None:
        return Readiness(False, "fenced")  # registered fenced; no heartbeat answer yet
    if view.heartbeat_age_s > session_timeout_s:
        return Readiness(False, "controller_unreachable")
    if view.fenced:
        return Readiness(False, "fenced")
    if not view.caught_up:
        return Readiness(False, "not_caught_up")
    return Readiness(True)


BROKER_STATES = ("starting", "fenced", "unfenced", "shutting_down")


def broker_state(view: LifecycleView) -> str:
    """One of BROKER_STATES, for the rillet_broker_state gauge (the controller's view as
    this broker last heard it)."""
    if view.shutting_down:
        return "shutting_down"
    if not view.registered:
        return "starting"
    return "fenced" if view.fenced else "unfenced"
