"""A Cluster's status from what the API reports about its pods and nodes: pure."""
from __future__ import annotations

from .builders import names
from .conditions import Outcome
from .spec import ClusterSpec


def _pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def broker_state(pod: dict | None) -> str:
    if pod is None:
        return "Missing"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    if _pod_ready(pod):
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
    ready = sum(1 for b in broker_list if b["state"] == "Ready")
    if ready == spec.replicas:
        return Outcome(True, "Ready", f"{ready}/{spec.replicas} brokers ready")
    waiting = ", ".join(f"{b['pod']} {b['state']}" for b in broker_list if b["state"] != "Ready")
    return Outcome(False, "BrokersNotReady", f"{ready}/{spec.replicas} brokers ready ({waiting})",
                   reconciling=True)


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
