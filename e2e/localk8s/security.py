"""A pod's security context as this stand-in's node agent applies it with podman, in the
kubelet's terms: the container's fields over the pod's, runAsNonRoot checked against the
image's user, fsGroup as a supplementary group. Pure."""
from __future__ import annotations


def security_args(pod_sc: dict, container_sc: dict) -> list[str]:
    """podman flags for a container's security context, the container's fields over the
    pod's as the kubelet merges them: user and group, fsGroup as a supplementary group, a
    read-only root filesystem, dropped capabilities, no privilege escalation."""
    sec = {**pod_sc, **container_sc}
    argv: list[str] = []
    if sec.get("runAsUser") is not None:
        user = str(sec["runAsUser"])
        if sec.get("runAsGroup") is not None:
            user += f":{sec['runAsGroup']}"
        argv += ["--user", user]
    if pod_sc.get("fsGroup") is not None:
        argv += ["--group-add", str(pod_sc["fsGroup"])]
    if sec.get("readOnlyRootFilesystem"):
        # Only the pod's volumes writable, as under a kubelet (podman would add tmpfs mounts).
        argv += ["--read-only", "--read-only-tmpfs=false"]
    caps = sec.get("capabilities") or {}
    if "ALL" in (caps.get("drop") or ()):
        argv += ["--cap-drop", "all"]
    for cap in caps.get("add") or ():
        argv += ["--cap-add", cap]
    if sec.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    return argv


def non_root_refusal(pod_sc: dict, container_sc: dict, image_user: str) -> str | None:
    """As the kubelet checks runAsNonRoot before it starts a container: the user is runAsUser,
    else the image's USER, which must then be numeric to be checked at all."""
    sec = {**pod_sc, **container_sc}
    if not sec.get("runAsNonRoot"):
        return None
    user = sec.get("runAsUser")
    if user is None:
        name = image_user.split(":", 1)[0]
        if name in ("", "root"):
            return "container has runAsNonRoot and image will run as root"
        if not name.isdigit():
            return (f"container has runAsNonRoot and image has non-numeric user ({name}), "
                    "cannot verify user is non-root")
        user = int(name)
    if int(user) == 0:
        return "container's runAsUser breaks non-root policy"
    return None
