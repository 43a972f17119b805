"""External listeners (type nodeport | loadbalancer), as Strimzi builds them: a Service per
broker and a bootstrap Service per listener, and what each broker advertises on the listener,
the address a client outside Kubernetes reaches it by. Pure: the handler applies the Services
and hands back what the API server filled in (nodePorts, load balancer addresses).

- nodeport: a broker advertises its node's address (the pod's status.hostIP, read at start:
  one pod template serves all brokers) and its own Service's nodePort; the bootstrap address is
  every broker node's address with the bootstrap Service's nodePort.
- loadbalancer: a broker advertises its Service's load balancer address and the listener's
  port once the cluster assigned one; until then it advertises its in-cluster name on that
  listener and status says the listener is pending.
- `advertisedHost` / `advertisedPort` of `configuration.brokers[]` win over both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..spec import ClusterSpec, ListenerSpec
from . import names

LABEL_LISTENER = "rillet.io/listener"
# The pod's node address, from the downward API (status.hostIP), in the start command.
HOST_IP_ENV = "HOST_IP"
SERVICE_TYPES = {"nodeport": "NodePort", "loadbalancer": "LoadBalancer"}


@dataclass(frozen=True)
class Advertised:
    """What one broker advertises on one external listener. `host` None: its node's address
    ($HOST_IP at start)."""
    host: str | None
    port: int

    def shell(self) -> str:
        """host:port as the start command writes it (hosts are validated: no shell syntax)."""
        return f"{self.host if self.host else '$' + HOST_IP_ENV}:{self.port}"


def external(spec: ClusterSpec) -> tuple[ListenerSpec, ...]:
    return tuple(l for l in spec.listeners if l.external)


def needs_host_ip(spec: ClusterSpec) -> bool:
    """Whether some broker advertises its node's address (the pod gets $HOST_IP)."""
    return any(l.type == "nodeport" and not l.override(i).advertised_host
               for l in external(spec) for i in range(spec.replicas))


def _service(spec: ClusterSpec, listener: ListenerSpec, name: str, selector: dict[str, str],
             node_port: int | None) -> dict:
    port: dict = {"name": listener.name, "port": listener.port, "targetPort": listener.port,
                  "protocol": "TCP"}
    if node_port:
        port["nodePort"] = node_port
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": spec.namespace,
                         "labels": {**names.labels(spec.name), LABEL_LISTENER: listener.name}},
            "spec": {"type": SERVICE_TYPES[listener.type], "selector": selector,
                     # The client's address reaches the broker (ACL hosts, logs); a node
                     # without the broker forwards to it all the same.
                     "externalTrafficPolicy": "Cluster",
                     "ports": [port]}}


def broker_service(spec: ClusterSpec, listener: ListenerSpec, ordinal: int) -> dict:
    pod = names.pod(spec.name, ordinal)
    return _service(spec, listener, names.external_broker_service(spec.name, listener.name,
                                                                   ordinal),
                    {**names.selector_labels(spec.name),
                     "statefulset.kubernetes.io/pod-name": pod},
                    listener.override(ordinal).node_port)


def bootstrap_service(spec: ClusterSpec, listener: ListenerSpec) -> dict:
    return _service(spec, listener, names.external_bootstrap_service(spec.name, listener.name),
                    names.selector_labels(spec.name), listener.bootstrap_node_port)


def services(spec: ClusterSpec) -> list[dict]:
    """Every Service of the external listeners, for the brokers of `spec.replicas`."""
    out = []
    for listener in external(spec):
        out.append(bootstrap_service(spec, listener))
        out += [broker_service(spec, listener, i) for i in range(spec.replicas)]
    return out


def node_port(service: Mapping | None) -> int | None:
    ports = ((service or {}).get("spec") or {}).get("ports") or ()
    return next((p["nodePort"] for p in ports if p.get("nodePort")), None)


def load_balancer_address(service: Mapping | None) -> str | None:
    """The first ingress address the cluster assigned (ip, else hostname), or None."""
    ingress = (((service or {}).get("status") or {}).get("loadBalancer") or {}).get(
        "ingress") or ()
    for entry in ingress:
        address = entry.get("ip") or entry.get("hostname")
        if address:
            return str(address)
    return None


def advertised(listener: ListenerSpec, ordinal: int, service: Mapping | None
               ) -> Advertised | None:
    """What broker `ordinal` advertises on `listener` given its Service as the API server has
    it, or None while that is not known yet (a load balancer without an address)."""
    override = listener.override(ordinal)
    if listener.type == "nodeport":
        port = override.advertised_port or node_port(service)
        return Advertised(override.advertised_host, port) if port else None
    host = override.advertised_host or load_balancer_address(service)
    return Advertised(host, override.advertised_port or listener.port) if host else None


def advertised_table(spec: ClusterSpec, observed: Mapping[str, Mapping]
                     ) -> dict[tuple[str, int], Advertised | None]:
    """(listener name, broker) -> what it advertises, for every external listener and broker;
    `observed`: the Services by name as read back after applying them."""
    return {(l.name, i): advertised(l, i, observed.get(
                names.external_broker_service(spec.name, l.name, i)))
            for l in external(spec) for i in range(spec.replicas)}


def bootstrap_addresses(spec: ClusterSpec, listener: ListenerSpec,
                        observed: Mapping[str, Mapping], node_addresses: list[str]
                        ) -> list[str]:
    """host:port a client outside starts from, empty while unknown. nodeport: every address
    of a node that runs a broker (`node_addresses`) with the bootstrap nodePort."""
    service = observed.get(names.external_bootstrap_service(spec.name, listener.name))
    if listener.type == "nodeport":
        port = node_port(service)
        return [f"{_bracketed(a)}:{port}" for a in node_addresses] if port else []
    address = load_balancer_address(service)
    return [f"{_bracketed(address)}:{listener.port}"] if address else []


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def certificate_names(spec: ClusterSpec, observed: Mapping[str, Mapping],
                      node_addresses: list[str]) -> list[str]:
    """The names and addresses a TLS client outside dials the brokers by, which the broker
    certificate must cover besides the in-cluster names: overrides, load balancer addresses,
    and (nodeport) every node address a broker may be scheduled onto."""
    out: set[str] = set()
    for listener in external(spec):
        if not listener.tls:
            continue
        out |= {b.advertised_host for b in listener.brokers if b.advertised_host}
        if listener.type == "nodeport":
            out |= set(node_addresses)
        else:
            lb_services = [names.external_bootstrap_service(spec.name, listener.name)] + [
                names.external_broker_service(spec.name, listener.name, i)
                for i in range(spec.replicas)]
            out |= {a for a in (load_balancer_address(observed.get(s)) for s in lb_services)
                    if a}
    return sorted(out)


def node_addresses(node: Mapping) -> list[str]:
    """A Node's ExternalIP and InternalIP addresses (what a broker's hostIP can be)."""
    return [a["address"] for a in ((node.get("status") or {}).get("addresses") or ())
            if a.get("type") in ("ExternalIP", "InternalIP") and a.get("address")]


def status(spec: ClusterSpec, observed: Mapping[str, Mapping], broker_node_addresses: list[str]
           ) -> dict[str, dict]:
    """Per external listener name: its type and bootstrapServers, or pending with why."""
    out = {}
    for listener in external(spec):
        found = bootstrap_addresses(spec, listener, observed, broker_node_addresses)
        entry: dict = {"type": listener.type}
        if found:
            entry["bootstrapServers"] = ",".join(found)
        else:
            service = names.external_bootstrap_service(spec.name, listener.name)
            entry["pending"] = (f"Service {service} has no load balancer address yet"
                                if listener.type == "loadbalancer" else
                                f"no broker node address or nodePort of Service {service} yet")
        out[listener.name] = entry
    return out


def pending_brokers(table: Mapping[tuple[str, int], Advertised | None]) -> list[str]:
    """`listener/broker` entries that advertise their in-cluster name for want of an address."""
    return [f"{name}/{ordinal}" for (name, ordinal), adv in sorted(table.items()) if adv is None]
