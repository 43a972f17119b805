"""What a broker pod may do and use: security contexts and resources, pure.

By default the pods meet the `restricted` Pod Security Standard, so a Cluster runs in a
namespace that enforces it: not root (the broker image's USER is numeric, so the kubelet can
check runAsNonRoot), no privilege escalation, every capability dropped, the runtime's default
seccomp profile, and a read-only root filesystem (the broker writes only to its data volume
and /tmp, an emptyDir). fsGroup makes the data claim writable by that user. The CR's
`template.pod.securityContext` and `template.brokerContainer.securityContext` replace these
defaults whole (as Strimzi's templates do), so a platform with its own policy (e.g. assigned
user ids) sets exactly what it needs.
"""
from __future__ import annotations

import copy

from ..spec import ClusterSpec

BROKER_UID = 1001   # USER in broker_image/Dockerfile
POD_SECURITY_CONTEXT = {"runAsNonRoot": True, "fsGroup": BROKER_UID,
                        "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY_CONTEXT = {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                              "readOnlyRootFilesystem": True,
                              "capabilities": {"drop": ["ALL"]}}
# Sized for a small broker: its heap is Python objects plus the page cache it does not own;
# no CPU limit, as CPU throttling stalls replication and heartbeats long before it saves much.
DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"},
                     "limits": {"memory": "1Gi"}}


def pod_security_context(spec: ClusterSpec) -> dict:
    chosen = spec.pod.security_context
    return copy.deepcopy(POD_SECURITY_CONTEXT if chosen is None else chosen)


def container_security_context(spec: ClusterSpec) -> dict:
    chosen = spec.pod.container_security_context
    return copy.deepcopy(CONTAINER_SECURITY_CONTEXT if chosen is None else chosen)


def resources(spec: ClusterSpec) -> dict:
    return copy.deepcopy(spec.resources if spec.resources is not None else DEFAULT_RESOURCES)
