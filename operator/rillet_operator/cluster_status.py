"""A Cluster's status from what the API reports about its pods and nodes: pure."""
from __future__ import annotations

from .builders import names
from .conditions import Outcome, Step
from .spec import ClusterSpec


def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def broker_state(pod: dict | None) -> str:
    if pod is None:
        return "Missing"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    if pod_ready(pod):
        return "Ready"
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return "Starting" if phase == "Running" else phase


def brokers(spec: ClusterSpec, pods: dict[str, dict], node_labels: dict[str, dict]) -> list[dict]:
    """Per broker: id, pod, node, rack (the node's topology label), state."""
    out = []
    for ordinal in range(spec.replicas):
        name = names.pod(spec.name, ordinal)
        pod = pods.get(name)
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        entry: dict = {"id": ordinal, "pod": name, "state": broker_state(pod)}
        if node:
            entry["node"] = node
            if spec.rack_topology_key:
                rack = (node_labels.get(node) or {}).get(spec.rack_topology_key)
                if rack:
                    entry["rack"] = rack
        out.append(entry)
    return out


def outcome(spec: ClusterSpec, broker_list: list[dict]) -> Outcome:
    """Every broker ready (Ready) or not: what dynamic configs and rolls wait for."""
    ready = sum(1 for b in broker_list if b["state"] == "Ready")
    if ready == spec.replicas:
        return Outcome(True, "Ready", f"{ready}/{spec.replicas} brokers ready")
    waiting = ", ".join(f"{b['pod']} {b['state']}" for b in broker_list if b["state"] != "Ready")
    return Outcome(False, "BrokersNotReady", f"{ready}/{spec.replicas} brokers ready ({waiting})",
                   reconciling=True)


def serving(spec: ClusterSpec, broker_list: list[dict], new_brokers: frozenset[int] = frozenset(),
            established: bool = True) -> Outcome:
    """Whether the cluster serves clients: a majority of the controller voters is ready, and
    of the brokers that were already part of it (`new_brokers`, still starting in a scale-up,
    do not count) no more are down than the PodDisruptionBudget lets go at once (one by
    default), as during a rolling restart or a single pod's restart.

    Ready is True then, with reason BrokersStarting while some broker is not ready. That
    tolerance is for a cluster that was Ready (`established`): a new one, or one that stopped
    serving, is Ready once every broker is, so `kubectl wait --for=condition=Ready` after
    creating a Cluster still means all its brokers."""
    ready = [b for b in broker_list if b["state"] == "Ready"]
    total = len(broker_list)
    if len(ready) == total:
        return Outcome(True, "Ready", f"{total}/{total} brokers ready")
    if not established:
        return outcome(spec, broker_list)
    voters = names.voter_count(total)
    voters_ready = sum(1 for b in ready if b["id"] < voters)
    down = [b for b in broker_list if b["state"] != "Ready" and b["id"] not in new_brokers]
    waiting = ", ".join(f"{b['pod']} {b['state']}" for b in broker_list if b["state"] != "Ready")
    message = f"{len(ready)}/{total} brokers ready ({waiting})"
    if voters_ready * 2 > voters and len(down) <= spec.pdb_max_unavailable:
        return Outcome(True, "BrokersStarting", f"{message}; the cluster serves",
                       reconciling=True)
    return Outcome(False, "BrokersNotReady", message, reconciling=True)


def combine(serves: Outcome, rolling: Outcome | None, scaling: Outcome | None,
            warnings: list[str] | tuple[str, ...] = (), pending: Step | None = None,
            storage: Step | None = None) -> Outcome:
    """One Cluster outcome from the brokers' state (`serving`), the rolling restart and the
    scale steps (None: nothing under way), the config warnings, and other work that waits
    (`pending`, e.g. the brokers unreachable for restarts and configs: Reconciling only).

    A refusal or failure of a step (error) makes Ready False with its reason; otherwise Ready
    is whether the cluster serves, and its reason names the change that runs, if any."""
    roll_step = Step(rolling.reason, rolling.message) if rolling else None
    scale_step = Step(scaling.reason, scaling.message) if scaling else None
    extra = dict(scaling=scale_step, rolling=roll_step, warnings=tuple(warnings),
                 pending=pending, storage=storage)
    failed = next((o for o in (scaling, rolling) if o is not None and o.error), None)
    if failed is not None:
        return Outcome(False, failed.reason, failed.message, reconciling=failed.reconciling,
                       error=True, **extra)
    if not serves.ready:
        return Outcome(False, serves.reason, serves.message, reconciling=True, **extra)
    running = next((o for o in (scaling, rolling) if o is not None), None)
    if running is not None:
        return Outcome(True, running.reason, f"{running.message}; {serves.message}",
                       reconciling=True, **extra)
    return Outcome(True, serves.reason, serves.message, reconciling=serves.reconciling, **extra)


def listeners(spec: ClusterSpec) -> list[dict]:
    """What a client needs per listener: its bootstrap address, whether it is TLS (trust the
    CA in status.certificates.clusterCaSecret) and how it authenticates."""
    if not spec.secured:
        return [{"name": "plain", "port": names.CLIENT_PORT, "tls": False,
                 "authentication": "none",
                 "bootstrapServers": names.bootstrap_address(spec.name, spec.namespace)}]
    return [{"name": l.name, "port": l.port, "tls": l.tls, "authentication": l.authentication,
             "bootstrapServers": names.listener_bootstrap(spec.name, spec.namespace, l.port)}
            for l in spec.listeners]
