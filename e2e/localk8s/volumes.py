"""Pod volumes as host folders that the node agent bind-mounts into containers.

configMap, secret, downwardAPI and projected (service account token + kube-root-ca.crt +
namespace) volumes are written as files; emptyDir is a folder; persistentVolumeClaim resolves to
the bound PV's folder; hostPath is used as is. Files are rewritten in place when their source
changes (re-synced by the pod worker), so the bind mounts see updates.
"""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from .kube import ApiError, Kube


class VolumeError(Exception):
    """A volume cannot be prepared yet (missing ConfigMap, unbound claim...); the reason is shown
    in the pod's status and the worker retries."""


def field_value(pod: dict, path: str) -> str:
    """Value of a downward-API fieldPath such as metadata.name or metadata.labels['app']."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    if path.startswith("metadata.labels['") or path.startswith("metadata.annotations['"):
        which = "labels" if ".labels[" in path else "annotations"
        key = path.split("['", 1)[1].rstrip("']")
        return meta.get(which, {}).get(key, "")
    simple = {
        "metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "metadata.labels": _kv_lines(meta.get("labels", {})),
        "metadata.annotations": _kv_lines(meta.get("annotations", {})),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": status.get("podIP", ""), "status.hostIP": status.get("hostIP", ""),
        "status.podIPs": status.get("podIP", ""), "status.hostIPs": status.get("hostIP", ""),
    }
    if path not in simple:
        raise VolumeError(f"unsupported fieldPath {path}")
    return simple[path]


def _kv_lines(d: dict) -> str:
    return "\n".join(f'{k}="{v}"' for k, v in sorted(d.items()))


def resource_value(container: dict | None, ref: dict) -> str:
    """resourceFieldRef: requests/limits of a container, in the divisor's unit (default 1)."""
    resource = ref["resource"]
    kind, name = resource.split(".", 1)
    value = ((container or {}).get("resources", {}).get(kind, {}) or {}).get(name)
    if value is None:
        return "0"
    return str(value)


class VolumeWriter:
    """Materialises one pod's volumes under `root` (<state>/pods/<uid>/volumes)."""

    def __init__(self, kube: Kube, pod: dict, root: Path, pv_lookup) -> None:
        self.kube = kube
        self.pod = pod
        self.root = root
        self.pv_lookup = pv_lookup  # (namespace, claim) -> host path, raises VolumeError
        self.ns = pod["metadata"]["namespace"]

    def prepare(self) -> dict[str, Path]:
        """Returns volume name -> host path, writing every file-backed volume."""
        out: dict[str, Path] = {}
        for vol in self.pod["spec"].get("volumes", []) or []:
            out[vol["name"]] = self._prepare_one(vol)
        return out

    def _prepare_one(self, vol: dict) -> Path:
        name = vol["name"]
        target = self.root / name
        if "emptyDir" in vol:
            target.mkdir(parents=True, exist_ok=True)
            os.chmod(target, 0o777)
            self._own(target)
            return target
        if "hostPath" in vol:
            path = Path(vol["hostPath"]["path"])
            if vol["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                path.mkdir(parents=True, exist_ok=True)
            return path
        if "persistentVolumeClaim" in vol:
            path = self.pv_lookup(self.ns, vol["persistentVolumeClaim"]["claimName"])
            self._own(path)
            return path
        files: dict[str, tuple[bytes, int]] = {}
        if "configMap" in vol:
            self._configmap(vol["configMap"], files, vol["configMap"].get("defaultMode", 0o644))
        elif "secret" in vol:
            self._secret(vol["secret"], files, vol["secret"].get("defaultMode", 0o644))
        elif "downwardAPI" in vol:
            self._downward(vol["downwardAPI"], files, vol["downwardAPI"].get("defaultMode", 0o644))
        elif "projected" in vol:
            mode = vol["projected"].get("defaultMode", 0o644)
            for src in vol["projected"].get("sources", []) or []:
                if "configMap" in src:
                    self._configmap(src["configMap"], files, mode)
                elif "secret" in src:
                    self._secret(src["secret"], files, mode)
                elif "downwardAPI" in src:
                    self._downward(src["downwardAPI"], files, mode)
                elif "serviceAccountToken" in src:
                    self._token(src["serviceAccountToken"], files, mode)
        else:
            raise VolumeError(f"volume {name}: unsupported type {sorted(set(vol) - {'name'})}")
        write_files(target, files)
        return target

    def _own(self, path: Path) -> None:
        """The pod's fsGroup, as the kubelet applies it to volumes that support ownership
        (fsGroupChangePolicy Always): every file and folder gets that group, group read and
        write, and folders the setgid bit, so a non-root user of the pod can write there."""
        gid = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        if gid is None:
            return
        for folder, dirs, files in os.walk(path):
            os.chown(folder, -1, gid)
            os.chmod(folder, os.stat(folder).st_mode & 0o7777 | 0o2070)
            for name in files:
                f = os.path.join(folder, name)
                if not os.path.islink(f):
                    os.chown(f, -1, gid)
                    os.chmod(f, os.stat(f).st_mode & 0o7777 | 0o060)

    # ---- sources ------------------------------------------------------------------------------

    def _get(self, kind: str, name: str, optional: bool) -> dict | None:
        try:
            return self.kube.get(kind, name, self.ns)
        except ApiError as e:
            if e.status == 404 and optional:
                return None
            if e.status == 404:
                raise VolumeError(f'{kind.lower()} "{name}" not found') from e
            raise

    def _configmap(self, src: dict, files: dict, mode: int) -> None:
        cm = self._get("ConfigMap", src["name"], bool(src.get("optional")))
        if cm is None:
            return
        data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        _select(data, src.get("items"), files, mode, src.get("name"))

    def _secret(self, src: dict, files: dict, mode: int) -> None:
        name = src.get("secretName") or src.get("name")
        secret = self._get("Secret", name, bool(src.get("optional")))
        if secret is None:
            return
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
        _select(data, src.get("items"), files, mode, name)

    def _downward(self, src: dict, files: dict, mode: int) -> None:
        for item in src.get("items", []) or []:
            if "fieldRef" in item:
                value = field_value(self.pod, item["fieldRef"]["fieldPath"])
            else:
                value = resource_value(None, item["resourceFieldRef"])
            files[item["path"]] = (value.encode(), item.get("mode", mode))

    def _token(self, src: dict, files: dict, mode: int) -> None:
        """A bound service account token from the TokenRequest API, as kubelet gets it."""
        meta = self.pod["metadata"]
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        spec: dict[str, Any] = {
            "expirationSeconds": max(int(src.get("expirationSeconds", 3607)), 600),
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                               "uid": meta["uid"]}}
        if src.get("audience"):
            spec["audiences"] = [src["audience"]]
        try:
            answer = self.kube.request(
                "POST", Kube.path("ServiceAccount", self.ns, sa, "token"),
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        except ApiError as e:
            raise VolumeError(f"service account token for {sa}: {e}") from e
        files[src.get("path", "token")] = (answer["status"]["token"].encode(), mode)


def _select(data: dict[str, bytes], items: list | None, files: dict, mode: int, what: str) -> None:
    if not items:
        for k, v in data.items():
            files[k] = (v, mode)
        return
    for item in items:
        if item["key"] not in data:
            raise VolumeError(f'key "{item["key"]}" not found in {what}')
        files[item["path"]] = (data[item["key"]], item.get("mode", mode))


def write_files(target: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Writes files (in place when the content changed) and removes files no longer listed."""
    target.mkdir(parents=True, exist_ok=True)
    for rel, (content, mode) in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != content:
            with open(path, "wb") as f:
                f.write(content)
        os.chmod(path, mode & 0o777)
    wanted = {str(target / rel) for rel in files}
    for root, _dirs, names in os.walk(target):
        for n in names:
            p = os.path.join(root, n)
            if p not in wanted:
                os.unlink(p)


def pod_env(kube: Kube, pod: dict, container: dict, base: dict[str, str]) -> dict[str, str]:
    """The container's environment: base (KUBERNETES_SERVICE_*), envFrom, then env (env wins),
    with $(VAR) references expanded as Kubernetes does."""
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = dict(base)
    for src in container.get("envFrom", []) or []:
        prefix = src.get("prefix", "")
        if "configMapRef" in src:
            ref = src["configMapRef"]
            obj = _maybe(kube, "ConfigMap", ref["name"], ns, ref.get("optional"))
            for k, v in ((obj or {}).get("data") or {}).items():
                env[prefix + k] = v
        elif "secretRef" in src:
            ref = src["secretRef"]
            obj = _maybe(kube, "Secret", ref["name"], ns, ref.get("optional"))
            for k, v in ((obj or {}).get("data") or {}).items():
                env[prefix + k] = base64.b64decode(v).decode(errors="replace")
    for var in container.get("env", []) or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(var.get("value", ""), env)
            continue
        vf = var["valueFrom"]
        if "fieldRef" in vf:
            env[name] = field_value(pod, vf["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in vf:
            env[name] = resource_value(container, vf["resourceFieldRef"])
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            obj = _maybe(kube, "ConfigMap", ref["name"], ns, ref.get("optional"))
            value = ((obj or {}).get("data") or {}).get(ref["key"])
            if value is None and not ref.get("optional"):
                raise VolumeError(f'couldn\'t find key {ref["key"]} in ConfigMap {ns}/{ref["name"]}')
            if value is not None:
                env[name] = value
        elif "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            obj = _maybe(kube, "Secret", ref["name"], ns, ref.get("optional"))
            raw = ((obj or {}).get("data") or {}).get(ref["key"])
            if raw is None and not ref.get("optional"):
                raise VolumeError(f'couldn\'t find key {ref["key"]} in Secret {ns}/{ref["name"]}')
            if raw is not None:
                env[name] = base64.b64decode(raw).decode(errors="replace")
    return env


def _maybe(kube: Kube, kind: str, name: str, ns: str, optional: bool | None) -> dict | None:
    try:
        return kube.get(kind, name, ns)
    except ApiError as e:
        if e.status == 404:
            if optional:
                return None
            raise VolumeError(f'{kind.lower()} "{name}" not found') from e
        raise


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion: known names are replaced, $$ escapes, unknown stay as is."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and ")" in value[i:]:
            end = value.index(")", i)
            name = value[i + 2:end]
            out.append(env.get(name, value[i:end + 1]))
            i = end + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
