"""What the `restricted` Pod Security Standard refuses in a pod spec, checked offline (unit
tests of the operator's builders, the chart's rendering); the e2e suite's namespaces enforce
the same standard through the API server's own PodSecurity admission."""
from __future__ import annotations

# Volume types the restricted profile admits.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod: dict) -> list[str]:
    """What the `restricted` Pod Security Standard (Kubernetes 1.25+) would refuse in a pod
    spec, per its published controls."""
    out: list[str] = []
    psc = pod.get("securityContext") or {}
    for vol in pod.get("volumes") or ():
        kinds = set(vol) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {vol['name']}: {sorted(kinds)}")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        out.append("host namespaces")
    for c in [*(pod.get("initContainers") or ()), *pod["containers"]]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or ()):
            out.append(f"{name}: capabilities not dropped")
        if set((sc.get("capabilities") or {}).get("add") or ()) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities added")
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccomp {seccomp}")
    return out
