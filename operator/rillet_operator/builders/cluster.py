"""The objects a Cluster becomes, as plain dicts: ConfigMap, headless and bootstrap Services,
StatefulSet, PodDisruptionBudget, ServiceAccount and the rack ClusterRoleBinding.

Owner references are added by the handler (kopf.adopt); everything else is here.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Mapping

from rillet.defs.dynamic_keys import DYNAMIC_KEYS

from ..spec import ClusterSpec
from . import broker_config as bc
from . import listeners, names
from . import security_context as sc


CERT_ANNOTATION = "rillet.io/broker-cert"
Advertisements = Mapping[tuple[str, int], "listeners.Advertised | None"]


def _meta(spec: ClusterSpec, name: str) -> dict:
    return {"name": name, "namespace": spec.namespace, "labels": names.labels(spec.name)}


def config_map(spec: ClusterSpec, cluster_id: str, admin_http: bool) -> dict:
    props = bc.render_properties(bc.shared_settings(spec, cluster_id, admin_http))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(spec, names.config_map(spec.name)),
            "data": {"server.properties": props}}


def _port_name(listener: str) -> str:
    return "clients" if listener == bc.CLIENT else listener.lower()


def _ports(spec: ClusterSpec, admin_http: bool) -> list[dict]:
    ports = [{"name": _port_name(n), "port": p, "targetPort": p, "protocol": "TCP"}
             for n, p in bc.broker_listeners(spec)]
    if admin_http:
        ports.append({"name": "admin", "port": names.ADMIN_PORT,
                      "targetPort": names.ADMIN_PORT, "protocol": "TCP"})
    return ports


def headless_service(spec: ClusterSpec, admin_http: bool) -> dict:
    """Per-pod DNS names; not-ready addresses are published because a broker only becomes
    ready once the quorum has formed, which needs the voters to find each other first."""
    ports = _ports(spec, admin_http) + [{"name": "controller", "port": names.CONTROLLER_PORT,
                                   "targetPort": names.CONTROLLER_PORT, "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(spec, names.headless_service(spec.name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": names.selector_labels(spec.name), "ports": ports}}


def bootstrap_service(spec: ClusterSpec) -> dict:
    """What clients are given: ready brokers only. port == targetPort (clients of the local
    e2e cluster dial the pod's port directly)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(spec, names.bootstrap_service(spec.name)),
            "spec": {"type": "ClusterIP", "selector": names.selector_labels(spec.name),
                     "ports": _ports(spec, False)}}


def service_account(spec: ClusterSpec) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(spec, names.service_account(spec.name))}


def rack_binding(spec: ClusterSpec, role: str = names.NODE_READER_ROLE) -> dict:
    """Lets the brokers' init container read Nodes (cluster-scoped, hence a ClusterRoleBinding
    to the chart's node-reader ClusterRole ``role``)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": names.rack_binding(spec.namespace, spec.name),
                         "labels": {**names.labels(spec.name),
                                    "rillet.io/cluster-namespace": spec.namespace}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": names.service_account(spec.name),
                          "namespace": spec.namespace}]}


def pdb(spec: ClusterSpec) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(spec, names.pdb(spec.name)),
            "spec": {"maxUnavailable": spec.pdb_max_unavailable,
                     "selector": {"matchLabels": names.selector_labels(spec.name)}}}


def _probes(admin_http: bool) -> dict:
    if admin_http:
        return {
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": names.ADMIN_PORT},
                               "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 3},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": names.ADMIN_PORT},
                              "initialDelaySeconds": 30, "periodSeconds": 10,
                              "timeoutSeconds": 5, "failureThreshold": 6},
        }
    # Older broker images without the admin port: the client listener opens only once the
    # broker is registered and unfenced, so a TCP check is a fair stand-in for /readyz.
    return {"readinessProbe": {"tcpSocket": {"port": names.CLIENT_PORT}, "periodSeconds": 5,
                               "timeoutSeconds": 3, "failureThreshold": 3}}


def config_hash(spec: ClusterSpec, cluster_id: str, admin_http: bool) -> str:
    """Of the rendered properties without the dynamic keys: a pod started with other static
    properties needs a restart; dynamic ones are applied live (handlers/rolling.py), so
    changing only them changes no pod template."""
    static = dataclasses.replace(spec, config=tuple(
        (k, v) for k, v in spec.config if k not in DYNAMIC_KEYS))
    text = config_map(static, cluster_id, admin_http)["data"]["server.properties"]
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rack_init(spec: ClusterSpec) -> dict:
    return {"name": "rack", "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
            "securityContext": sc.container_security_context(spec),
            "command": ["python3", "-c", bc.RACK_INIT_SCRIPT],
            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "RACK_TOPOLOGY_KEY", "value": spec.rack_topology_key}],
            "volumeMounts": [{"name": "rack", "mountPath": bc.RACK_MOUNT}]}


def statefulset(spec: ClusterSpec, cluster_id: str, admin_http: bool,
                cert_hash: str = "", external: Advertisements | None = None) -> dict:
    """`cert_hash`: of the broker certificate (secured clusters), in the pod template so that
    a renewed certificate rolls the brokers onto it. `external`: what each broker advertises
    on the external listeners (listeners.advertised_table), in the start command, so that an
    address that changes (a load balancer's, assigned late) rolls the brokers onto it."""
    sel = names.selector_labels(spec.name)
    pod_labels = {**dict(spec.pod.labels), **names.labels(spec.name)}
    annotations = {**dict(spec.pod.annotations),
                   "rillet.io/config-hash": config_hash(spec, cluster_id, admin_http)}
    if spec.secured:
        annotations[CERT_ANNOTATION] = cert_hash
    ports = [{"name": _port_name(n), "containerPort": p} for n, p in bc.broker_listeners(spec)]
    ports.append({"name": "controller", "containerPort": names.CONTROLLER_PORT})
    if admin_http:
        ports.append({"name": "admin", "containerPort": names.ADMIN_PORT})
    container = {
        "name": "broker", "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
        "command": ["/bin/sh", "-c", bc.start_script(spec, external)],
        "ports": ports,
        "volumeMounts": [{"name": "data", "mountPath": bc.DATA_MOUNT},
                         {"name": "config", "mountPath": bc.CONFIG_MOUNT, "readOnly": True},
                         {"name": "rack", "mountPath": bc.RACK_MOUNT},
                         {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": sc.container_security_context(spec),
        "resources": sc.resources(spec),
        **_probes(admin_http),
    }
    if listeners.needs_host_ip(spec):
        container["env"] = [{"name": listeners.HOST_IP_ENV,
                             "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
    volumes = [{"name": "config", "configMap": {"name": names.config_map(spec.name)}},
               {"name": "rack", "emptyDir": {}},
               {"name": "tmp", "emptyDir": {}}]
    if spec.secured:
        container["volumeMounts"].append({"name": "certs", "mountPath": bc.CERTS_MOUNT,
                                          "readOnly": True})
        volumes.append({"name": "certs", "secret": {"secretName": names.broker_certs(spec.name)}})
    pod_spec: dict = {
        "serviceAccountName": names.service_account(spec.name),
        "securityContext": sc.pod_security_context(spec),
        "terminationGracePeriodSeconds": 30,
        "containers": [container],
        "volumes": volumes,
    }
    if spec.rack_topology_key:
        pod_spec["initContainers"] = [_rack_init(spec)]
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": spec.rack_topology_key,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": sel}}]
    if spec.pod.affinity:
        pod_spec["affinity"] = spec.pod.affinity
    if spec.pod.tolerations:
        pod_spec["tolerations"] = list(spec.pod.tolerations)
    if spec.pod.priority_class_name:
        pod_spec["priorityClassName"] = spec.pod.priority_class_name
    sts_spec: dict = {
        "replicas": spec.replicas,
        "serviceName": names.headless_service(spec.name),
        # All brokers start together: the voters must meet to form the quorum.
        "podManagementPolicy": "Parallel",
        # The operator restarts brokers itself (one at a time, never below min ISR).
        "updateStrategy": {"type": "OnDelete"},
        "selector": {"matchLabels": sel},
        "template": {"metadata": {"labels": pod_labels, "annotations": annotations},
                     "spec": pod_spec},
    }
    if spec.storage.type == "persistent-claim":
        claim: dict = {"accessModes": ["ReadWriteOnce"],
                       "resources": {"requests": {"storage": spec.storage.size}}}
        if spec.storage.storage_class:
            claim["storageClassName"] = spec.storage.storage_class
        sts_spec["volumeClaimTemplates"] = [{"metadata": {"name": "data",
                                                          "labels": names.labels(spec.name)},
                                             "spec": claim}]
    else:
        volumes.append({"name": "data", "emptyDir": {}})
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": _meta(spec, names.statefulset(spec.name)), "spec": sts_spec}


def owned_objects(spec: ClusterSpec, cluster_id: str, admin_http: bool,
                  cert_hash: str = "", external: Advertisements | None = None) -> list[dict]:
    """Every namespaced object of the cluster but its certificate Secrets (handlers/
    certificates.py), in the order they are applied."""
    return [service_account(spec), config_map(spec, cluster_id, admin_http),
            headless_service(spec, admin_http), bootstrap_service(spec),
            statefulset(spec, cluster_id, admin_http, cert_hash, external), pdb(spec)]
