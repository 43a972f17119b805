"""Rolling restarts: which broker pod to restart next, if any. Pure: the caller passes the
pods, the StatefulSet's update revision, the active controller, the under-replicated
partition count and the clock, and keeps the returned state in `status.roll`.

A pod needs a restart when it runs an older revision of the StatefulSet's pod template
(OnDelete: the operator deletes it), or when a manual roll (annotation rillet.io/roll, any new
value) has not restarted it yet. One pod at a time: the next is deleted only when every pod is
ready, no partition is under-replicated and every controller voter has the committed metadata
log (a voter that came back with an empty disk fetches it first: stopping another voter before
it has would leave a majority that may lack committed records); the active controller goes
last. A pod that is not back and ready within the timeout makes the roll Stuck (a condition)
until it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

ROLL_ANNOTATION = "rillet.io/roll"


@dataclass(frozen=True)
class PodView:
    name: str
    ordinal: int
    revision: str
    ready: bool
    terminating: bool
    uid: str


@dataclass(frozen=True)
class Decision:
    state: dict[str, Any]
    delete: str | None = None      # the pod to delete now
    waiting: str = ""              # why nothing happens this pass (while rolling)
    stuck: bool = False

    @property
    def rolling(self) -> bool:
        return self.state.get("phase") in ("Rolling", "Stuck")


def lagging_voters(voters: Mapping[int, int], high_watermark: int) -> list[int]:
    """Voters whose metadata log ends before the quorum's high watermark (DescribeQuorum)."""
    return sorted(v for v, end in voters.items() if end < high_watermark)


def decide(pods: Sequence[PodView], update_revision: str, controller: int | None,
           under_replicated: int, manual_token: str | None, state: Mapping[str, Any] | None,
           now: float, timeout_s: float, lagging: Sequence[int] = ()) -> Decision:
    st = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
          for k, v in (state or {}).items()}
    st.setdefault("restarted", [])
    st.setdefault("order", [])
    st.setdefault("urpBefore", {})
    if manual_token and manual_token != st.get("token"):
        st.update(token=manual_token, manualPending=True, restarted=[], order=[],
                  urpBefore={}, controllerAt={})
    by_name = {p.name: p for p in pods}

    current = st.get("current")
    if current:
        pod = by_name.get(current["pod"])
        if pod and pod.uid != current["uid"] and pod.ready and not pod.terminating:
            st["restarted"].append(current["pod"])
            st["current"] = None
        else:
            late = now - float(current["since"]) > timeout_s
            st["phase"] = "Stuck" if late else "Rolling"
            why = (f"pod {current['pod']} not back and ready after "
                   f"{now - float(current['since']):.0f} s") if late else \
                f"waiting for pod {current['pod']} to come back ready"
            st["reason"] = why if late else ""
            return Decision(st, waiting=why, stuck=late)

    def needs(p: PodView) -> bool:
        return p.revision != update_revision or (
            bool(st.get("manualPending")) and p.name not in st["restarted"])

    todo = sorted((p for p in pods if needs(p)), key=lambda p: (p.ordinal == controller,
                                                                p.ordinal))
    if not todo:
        if st.get("phase") in ("Rolling", "Stuck"):
            st["phase"] = "Done"
        st["manualPending"] = False
        st["reason"] = ""
        return Decision(st)
    st["phase"] = "Rolling"
    st["reason"] = ""
    not_ready = sorted(p.name for p in pods if not p.ready or p.terminating)
    if not_ready:
        return Decision(st, waiting=f"waiting for {', '.join(not_ready)} to be ready")
    if under_replicated:
        return Decision(st, waiting=f"waiting for {under_replicated} under-replicated "
                                    f"partitions to catch up")
    if lagging:
        return Decision(st, waiting=f"waiting for controller voter(s) "
                                    f"{', '.join(map(str, lagging))} to catch up with the "
                                    f"metadata log")
    nxt = todo[0]
    st.setdefault("controllerAt", {})[nxt.name] = controller   # the active one when deleted
    st["current"] = {"pod": nxt.name, "uid": nxt.uid, "since": now}
    st["order"].append(nxt.name)
    st["urpBefore"][nxt.name] = under_replicated
    return Decision(st, delete=nxt.name, waiting=f"restarting {nxt.name} "
                                                 f"({len(todo) - 1} more after it)")
