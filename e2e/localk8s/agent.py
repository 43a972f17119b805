"""The node agent: the one stand-in of the local cluster (it replaces kubelet).

One process serves the three Node objects (one per zone). It
  - registers the Nodes and keeps them Ready (status heartbeats + Leases in kube-node-lease);
  - runs every pod bound to them as a podman pod (see pods.PodWorker);
  - keeps the cluster DNS names in hosts files (dns.Dns);
  - provisions PersistentVolumes for the default StorageClass (local folders) and deletes them
    after their claim is gone;
  - forwards <bridge gateway>:<apiserver port> to the API server on 127.0.0.1, which is the
    address pods get in KUBERNETES_SERVICE_HOST/PORT; also <gateway>:443, because
    kubernetes.default.svc resolves to the gateway and clients that use that name dial 443;
  - serves /containerLogs over TLS to the API server so `kubectl logs` works; every attempt's log
    is also a file: <state>/pods/<uid>/logs/<container>/<attempt>.log (CRI "k8s-file" format).

Run by `e2e/local-cluster up`; stopped (SIGTERM) by `down`, which then removes the containers.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import host
from .dns import Dns
from .host import Layout
from .kube import ApiError, Kube
from .pods import PodWorker, now_iso
from .volumes import VolumeError

PROVISIONER = "rillet.io/local-path"
HEARTBEAT_S = 10
POD_SYNC_S = 1.0


class Agent:
    def __init__(self, layout: Layout, kube: Kube, api_port: int, version: str) -> None:
        self.layout = layout
        self.kube = kube
        self.api_port = api_port
        self.version = version
        self.nodes = {name: zone for name, zone in host.NODES}
        self.workers: dict[str, PodWorker] = {}
        self.dns = Dns(kube)
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self._snap: dict[str, dict] = {}
        self._snap_at = 0.0
        self._snap_lock = threading.Lock()
        self.log_port = 0

    def log(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} agent: {msg}", flush=True)

    # ---- shared podman view ------------------------------------------------------------------------

    def snapshot(self, refresh: bool = False) -> dict[str, dict]:
        """podman ps of our containers, by name; one podman call per ~0.5 s for all workers."""
        with self._snap_lock:
            if refresh or time.monotonic() - self._snap_at > 0.5:
                out = host.podman(self.layout, "ps", "-a", "--format", "json", "--filter",
                                  f"label={host.LABEL}=1", check=False).stdout
                try:
                    rows = json.loads(out or "[]")
                except ValueError:
                    rows = []
                self._snap = {r["Names"][0]: r for r in rows if r.get("Names")}
                self._snap_at = time.monotonic()
            return self._snap

    def base_env(self) -> dict[str, str]:
        """What kubelet injects for the API: an address where the API server really answers."""
        port = str(self.api_port)
        return {"KUBERNETES_SERVICE_HOST": host.GATEWAY, "KUBERNETES_SERVICE_PORT": port,
                "KUBERNETES_SERVICE_PORT_HTTPS": port,
                "KUBERNETES_PORT": f"tcp://{host.GATEWAY}:{port}",
                "KUBERNETES_PORT_443_TCP": f"tcp://{host.GATEWAY}:{port}",
                "KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": port,
                "KUBERNETES_PORT_443_TCP_ADDR": host.GATEWAY}

    # ---- nodes ---------------------------------------------------------------------------------------

    def register_nodes(self) -> None:
        for name, zone in self.nodes.items():
            labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                      "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": zone,
                      "topology.kubernetes.io/region": "local",
                      "node.kubernetes.io/instance-type": "rillet-e2e"}
            try:
                self.kube.create({"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "labels": labels}, "spec": {}})
            except ApiError as e:
                if e.status != 409:
                    raise
                self.kube.patch("Node", name, {"metadata": {"labels": labels}})
            self.heartbeat(name)

    def heartbeat(self, name: str) -> None:
        now = now_iso()
        conds = [{"type": t, "status": "False", "reason": f"Kubelethas{'No' + t}",
                  "message": "ok", "lastHeartbeatTime": now, "lastTransitionTime": now}
                 for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
        conds.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                      "message": "rillet node agent is posting ready status",
                      "lastHeartbeatTime": now, "lastTransitionTime": now})
        resources = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        status = {"conditions": conds, "capacity": resources, "allocatable": resources,
                  "addresses": [{"type": "InternalIP", "address": host.GATEWAY},
                                {"type": "Hostname", "address": name}],
                  "daemonEndpoints": {"kubeletEndpoint": {"Port": self.log_port}},
                  "nodeInfo": {"kubeletVersion": self.version, "kubeProxyVersion": "",
                               "containerRuntimeVersion": "podman://4", "operatingSystem": "linux",
                               "architecture": "amd64", "osImage": "rillet-e2e local node",
                               "kernelVersion": os.uname().release, "machineID": name,
                               "systemUUID": name, "bootID": name}}
        current = self.kube.get("Node", name)
        old = {c["type"]: c for c in current.get("status", {}).get("conditions", []) or []}
        for c in conds:  # keep transition times stable while the status stays the same
            if old.get(c["type"], {}).get("status") == c["status"]:
                c["lastTransitionTime"] = old[c["type"]]["lastTransitionTime"]
        self.kube.request("PATCH", Kube.path("Node", None, name, "status"), {"status": status},
                          content_type="application/merge-patch+json")
        self._renew_lease(name, current["metadata"]["uid"])

    def _renew_lease(self, name: str, node_uid: str) -> None:
        micro = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro}
        try:
            self.kube.patch("Lease", name, {"spec": spec}, "kube-node-lease", merge=True)
        except ApiError as e:
            if e.status != 404:
                raise
            self.kube.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                              "metadata": {"name": name, "namespace": "kube-node-lease",
                                           "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                                                "name": name, "uid": node_uid}]},
                              "spec": spec})

    def heartbeat_loop(self) -> None:
        while not self.stopping.wait(HEARTBEAT_S):
            for name in self.nodes:
                try:
                    self.heartbeat(name)
                except Exception as e:  # noqa: BLE001 - keep beating; the API may be restarting
                    self.log(f"heartbeat {name}: {e}")

    # ---- pods ----------------------------------------------------------------------------------------

    def pod_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.sync_pods()
            except Exception:  # noqa: BLE001
                self.log(f"pod sync: {traceback.format_exc()}")
            self.wake.wait(POD_SYNC_S)
            self.wake.clear()

    def sync_pods(self) -> None:
        pods = [p for p in self.kube.list("Pod") if p["spec"].get("nodeName") in self.nodes]
        seen = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            worker = self.workers.get(uid)
            if worker is None:
                if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") and \
                        not pod["metadata"].get("deletionTimestamp"):
                    continue  # finished before this agent started; nothing to run
                worker = PodWorker(self, pod)
                self.workers[uid] = worker
                worker.start()
            else:
                worker.set_pod(pod)
        for uid, worker in list(self.workers.items()):
            if uid not in seen:
                worker.gone()
            if worker.finished:
                del self.workers[uid]

    def watch_loop(self) -> None:
        """Wakes the pod loop on any pod change, so new pods start without waiting a poll."""
        while not self.stopping.is_set():
            try:
                rv = self.kube.request("GET", Kube.path("Pod"), params={"limit": "1"})["metadata"][
                    "resourceVersion"]
                for _event in self.kube.watch("Pod", resource_version=rv, timeout_seconds=50):
                    self.wake.set()
                    if self.stopping.is_set():
                        return
            except Exception:  # noqa: BLE001 - fall back to polling until the next try
                self.stopping.wait(1)

    def dns_loop(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                self.dns.sync()
            except Exception as e:  # noqa: BLE001
                self.log(f"dns sync: {e}")

    # ---- storage ---------------------------------------------------------------------------------

    def pv_path(self, ns: str, claim: str) -> Path:
        """Host folder of the PV bound to a claim; VolumeError until it is bound."""
        try:
            pvc = self.kube.get("PersistentVolumeClaim", claim, ns)
        except ApiError as e:
            raise VolumeError(f'persistentvolumeclaim "{claim}" not found') from e
        name = pvc["spec"].get("volumeName")
        if not name or pvc.get("status", {}).get("phase") != "Bound":
            raise VolumeError(f'persistentvolumeclaim "{claim}" is not bound')
        pv = self.kube.get("PersistentVolume", name)
        spec = pv["spec"]
        path = (spec.get("hostPath") or spec.get("local") or {}).get("path")
        if not path:
            raise VolumeError(f"persistentvolume {name} has no local path")
        Path(path).mkdir(parents=True, exist_ok=True)
        return Path(path)

    def provision_loop(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                self.provision_once()
            except Exception as e:  # noqa: BLE001
                self.log(f"provisioner: {e}")

    def provision_once(self) -> None:
        """External-provisioner contract: claims of our StorageClass with a selected node get a
        PV (a local folder with node affinity); released PVs of ours are deleted with the data."""
        classes = {c["metadata"]["name"] for c in self.kube.list("StorageClass")
                   if c.get("provisioner") == PROVISIONER}
        for pvc in self.kube.list("PersistentVolumeClaim"):
            meta, spec = pvc["metadata"], pvc["spec"]
            ann = meta.get("annotations", {})
            node = ann.get("volume.kubernetes.io/selected-node")
            if spec.get("volumeName") or spec.get("storageClassName") not in classes \
                    or node not in self.nodes or meta.get("deletionTimestamp"):
                continue
            self._create_pv(pvc, node)
        for pv in self.kube.list("PersistentVolume"):
            ann = pv["metadata"].get("annotations", {})
            if ann.get("pv.kubernetes.io/provisioned-by") != PROVISIONER:
                continue
            if pv.get("status", {}).get("phase") in ("Released", "Failed") and \
                    pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
                path = pv["spec"].get("hostPath", {}).get("path")
                if path and path.startswith(str(self.layout.volumes)):
                    shutil.rmtree(path, ignore_errors=True)
                self.kube.delete("PersistentVolume", pv["metadata"]["name"])

    def _create_pv(self, pvc: dict, node: str) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        name = f"pvc-{meta['uid']}"
        path = self.layout.volumes / name
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o777)  # pods may run as any user, as with local-path provisioners
        size = spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")
        sc = self.kube.get("StorageClass", spec["storageClassName"])
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": size}, "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                "storageClassName": spec["storageClassName"],
                "volumeMode": spec.get("volumeMode", "Filesystem"),
                "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                             "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            }}
        try:
            self.kube.create(pv)
            self.log(f"provisioned {name} for {meta['namespace']}/{meta['name']} on {node}")
        except ApiError as e:
            if e.status != 409:
                raise

    # ---- API forwarder ---------------------------------------------------------------------------

    def forward_loop(self, listener: socket.socket) -> None:
        listener.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                client, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.api_port), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        t.start()
        pump(client, upstream)
        t.join(5)
        client.close()
        upstream.close()

    # ---- logs for the API server -----------------------------------------------------------------

    def log_file(self, ns: str, pod: str, container: str, previous: bool) -> Path | None:
        for w in list(self.workers.values()):
            if w.ns == ns and w.pod_name == pod:
                for c in w.containers:
                    if c.name == container:
                        n = c.attempts - (2 if previous else 1)
                        return w.dir / "logs" / container / f"{n}.log" if n >= 0 else None
        return None

    def start_log_server(self) -> ThreadingHTTPServer:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                parts = url.path.strip("/").split("/")
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404, "only /containerLogs/<ns>/<pod>/<container> is served")
                    return
                path = agent.log_file(parts[1], parts[2], parts[3], q.get("previous") == "true")
                if path is None or not path.exists():
                    self.send_error(404, "no such container log")
                    return
                text = "".join(_cri_log_lines(path, q.get("timestamps") == "true"))
                if q.get("tailLines"):
                    lines = text.splitlines(keepends=True)
                    text = "".join(lines[-int(q["tailLines"]):]) if int(q["tailLines"]) else ""
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt: str, *args: object) -> None:
                pass

        pki = self.layout.pki
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "kubelet.crt"), str(pki / "kubelet.key"))
        ctx.verify_mode = ssl.CERT_REQUIRED  # only the API server (its kubelet-client cert)
        server = ThreadingHTTPServer((host.GATEWAY, 0), Handler)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self.log_port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True, name="logs").start()
        return server

    # ---- run -------------------------------------------------------------------------------------

    def run(self) -> None:
        listeners = [socket.create_server((host.GATEWAY, self.api_port))]
        try:  # in-pod clients that default to https://kubernetes.default.svc (port 443), e.g. Spark
            listeners.append(socket.create_server((host.GATEWAY, 443)))
        except OSError as e:
            self.log(f"cannot also forward {host.GATEWAY}:443 to the API server: {e}")
        logs = self.start_log_server()
        self.register_nodes()
        threads = [threading.Thread(target=t, daemon=True, name=t.__name__) for t in (
            self.heartbeat_loop, self.pod_loop, self.watch_loop, self.dns_loop,
            self.provision_loop)]
        threads += [threading.Thread(target=self.forward_loop, args=(lst,), daemon=True)
                    for lst in listeners]
        for t in threads:
            t.start()
        self.log(f"serving nodes {', '.join(self.nodes)}; API forwarder {host.GATEWAY}:{self.api_port}")
        self.stopping.wait()
        for lst in listeners:
            lst.close()
        logs.shutdown()
        self.log("stopped")


def _cri_log_lines(path: Path, timestamps: bool):
    """Decodes the k8s-file/CRI log format: '<time> <stream> <P|F> <text>' per chunk."""
    partial = ""
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 3)
            if len(parts) < 4:
                continue
            ts, _stream, tag, text = parts
            partial += text
            if tag == "F":
                yield (f"{ts} " if timestamps else "") + partial + "\n"
                partial = ""
    if partial:
        yield partial + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localk8s.agent")
    parser.add_argument("--state", required=True)
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args(argv)
    layout = Layout.default()
    if Path(args.state) != layout.state:
        layout = Layout(layout.repo, Path(args.state), layout.cache)
    state = json.loads((layout.state_file).read_text())
    cfg = json.loads(Path(args.kubeconfig).read_text())
    server = cfg["clusters"][0]["cluster"]["server"]
    user = cfg["users"][0]["user"]
    # The agent speaks for all three nodes, with its own system:masters client certificate.
    kube = Kube(server, cfg["clusters"][0]["cluster"]["certificate-authority"],
                str(layout.pki / "agent.crt"), str(layout.pki / "agent.key"))
    del user
    version = Path(state["bin"]).parent.name
    agent = Agent(layout, kube, int(state["ports"]["apiserver"]), version)
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
