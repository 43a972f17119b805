"""One pod's life on this machine: a podman pod (own network namespace and IP on the bridge),
init containers in order, then the containers, probes, restarts with back-off, status reports,
and graceful deletion. Owned by one PodWorker thread per pod UID; the agent only hands it newer
copies of the pod object (`set_pod`) and tells it when the pod is gone from the API.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import host
from .kube import ApiError
from .probes import ProbeState, run_probe
from .security import non_root_refusal, security_args
from .volumes import VolumeError, VolumeWriter, expand, pod_env

if TYPE_CHECKING:
    from .agent import Agent

BACKOFF_BASE_S = float(os.environ.get("RILLET_AGENT_BACKOFF_BASE", "2"))
BACKOFF_CAP_S = float(os.environ.get("RILLET_AGENT_BACKOFF_CAP", "40"))
TICK_S = 0.5
RESYNC_VOLUMES_S = 10.0


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t if t is not None else time.time()))


@dataclass
class Container:
    """One container of the pod across its restarts."""

    spec: dict
    init: bool
    restart_count: int = 0
    attempts: int = 0  # containers created so far; attempt n logs to logs/<name>/<n>.log
    cname: str | None = None  # podman name of the current attempt
    cid: str = ""
    created: float = 0.0  # wall clock of the current attempt's start
    state: dict = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    backoff_until: float = 0.0
    crashes: int = 0
    done: bool = False  # terminated for good (init succeeded, or no restart by policy)
    image_id: str = ""
    probes: dict[str, ProbeState] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec["name"]

    def status(self) -> dict:
        s: dict[str, Any] = {
            "name": self.name, "image": self.spec.get("image", ""), "imageID": self.image_id,
            "ready": self.ready, "restartCount": self.restart_count, "state": self.state,
            "lastState": self.last_state, "started": self.started}
        if self.cid:
            s["containerID"] = f"podman://{self.cid}"
        return s


class PodWorker(threading.Thread):
    def __init__(self, agent: "Agent", pod: dict) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.agent = agent
        self.kube = agent.kube
        self.uid: str = meta["uid"]
        self.ns: str = meta["namespace"]
        self.pod_name: str = meta["name"]
        self._pod = pod
        self._lock = threading.Lock()
        self._gone = threading.Event()
        self.wake = threading.Event()
        self.sandbox = f"k8s_{self.ns}_{self.pod_name}_{self.uid[:8]}"
        self.dir: Path = agent.layout.pods / self.uid
        self.pod_ip = ""
        self.start_time = now_iso()
        self.containers = [Container(c, True) for c in pod["spec"].get("initContainers", []) or []]
        self.containers += [Container(c, False) for c in pod["spec"]["containers"]]
        self.volumes: dict[str, Path] = {}
        self.phase = "Pending"
        self.reason = ""
        self.message = ""
        self.last_status: str = ""
        self.finished = False  # the worker has torn down and may be forgotten

    # ---- inputs from the agent ---------------------------------------------------------------

    @property
    def pod(self) -> dict:
        with self._lock:
            return self._pod

    def set_pod(self, pod: dict) -> None:
        with self._lock:
            self._pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.wake.set()

    def gone(self) -> None:
        self._gone.set()
        self.wake.set()

    def deleting(self) -> bool:
        return self._gone.is_set() or bool(self.pod["metadata"].get("deletionTimestamp"))

    # ---- main loop -----------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._live()
        except Exception:  # noqa: BLE001 - log, then still tear down
            self.agent.log(f"pod {self.ns}/{self.pod_name}: worker error\n{traceback.format_exc()}")
            while not self.deleting() and not self.agent.stopping.is_set():
                self.wake.wait(1.0)
                self.wake.clear()
        finally:
            if not self.agent.stopping.is_set():
                self._teardown()
            self.finished = True

    def _live(self) -> None:
        while not self._sandbox_ready():
            if self.deleting() or self.agent.stopping.is_set():
                return
            self._report()
            self.wake.wait(2.0)
            self.wake.clear()
        last_resync = time.monotonic()
        while not self.deleting() and not self.agent.stopping.is_set():
            if time.monotonic() - last_resync > RESYNC_VOLUMES_S:
                self._resync_volumes()
                last_resync = time.monotonic()
            self._step()
            self._report()
            self.wake.wait(TICK_S)
            self.wake.clear()

    # ---- sandbox and volumes ---------------------------------------------------------------------

    def _sandbox_ready(self) -> bool:
        """Creates the podman pod and the volumes; False (with a reason in status) to retry."""
        try:
            if not self.pod_ip:
                self._create_sandbox()
            if not self.volumes:
                self.volumes = self._writer().prepare()
            self.reason = self.message = ""
            return True
        except VolumeError as e:
            self._waiting_all("ContainerCreating", f"volumes not ready: {e}")
            return False
        except RuntimeError as e:
            self._waiting_all("ContainerCreating", str(e))
            return False

    def _writer(self) -> VolumeWriter:
        pod = self._pod_with_ips()
        return VolumeWriter(self.kube, pod, self.dir / "volumes", self.agent.pv_path)

    def _pod_with_ips(self) -> dict:
        pod = json.loads(json.dumps(self.pod))
        pod.setdefault("status", {}).update({"podIP": self.pod_ip, "hostIP": host.GATEWAY})
        return pod

    def _resync_volumes(self) -> None:
        try:
            self._writer().prepare()
        except (VolumeError, ApiError, OSError) as e:
            self.agent.log(f"pod {self.ns}/{self.pod_name}: volume resync: {e}")

    def _create_sandbox(self) -> None:
        spec = self.pod["spec"]
        hostname = spec.get("hostname") or self.pod_name
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        lay = self.agent.layout
        if host.podman(lay, "pod", "exists", self.sandbox, check=False).returncode != 0:
            host.podman(lay, "pod", "create", "--name", self.sandbox, "--network", host.NETWORK,
                        "--no-hosts", "--hostname", hostname[:63],
                        "--label", f"{host.LABEL}=1", "--label", f"rillet.uid={self.uid}",
                        "--label", f"rillet.pod={self.pod_name}", "--label", f"rillet.ns={self.ns}",
                        "--infra-name", f"{self.sandbox}_infra")
        host.podman(lay, "pod", "start", self.sandbox)
        out = host.podman(lay, "inspect", f"{self.sandbox}_infra", "--format",
                          "{{(index .NetworkSettings.Networks \"%s\").IPAddress}}" % host.NETWORK)
        self.pod_ip = out.stdout.strip()
        if not self.pod_ip:
            raise RuntimeError("pod sandbox has no IP")
        fqdn = hostname
        if spec.get("subdomain"):
            fqdn = f"{hostname}.{spec['subdomain']}.{self.ns}.svc.{host.CLUSTER_DOMAIN}"
        self.agent.dns.register(self.uid, self.ns, self.dir, self.pod_ip, fqdn, hostname)

    # ---- containers ------------------------------------------------------------------------------

    def _step(self) -> None:
        if self.phase == "Failed":
            return  # an init container failed for good: nothing else runs
        snap = self.agent.snapshot()
        inits = [c for c in self.containers if c.init]
        pending_init = next((c for c in inits if not c.done), None)
        if pending_init is not None:
            self._drive(pending_init, snap)
            if pending_init.done and pending_init.state.get("terminated", {}).get("exitCode", 0) != 0:
                self._fail_pod("Init container failed", f"init container {pending_init.name} failed")
            return
        for c in self.containers:
            if not c.init:
                self._drive(c, snap)
                self._probe(c)

    def _drive(self, c: Container, snap: dict[str, dict]) -> None:
        """Advances one container: create when due, notice exits, restart per policy."""
        if c.done:
            return
        if c.cname is None:
            if time.monotonic() >= c.backoff_until:
                self._start(c)
            return
        info = snap.get(c.cname)
        if info is None:
            return  # created after the snapshot was taken
        state = info.get("State")
        if state == "running":
            if "running" not in c.state:
                c.state = {"running": {"startedAt": now_iso(c.created)}}
                c.started = "startupProbe" not in c.spec
            return
        if state in ("exited", "stopped") or info.get("Exited"):
            self._exited(c, int(info.get("ExitCode", 0)), info)

    def _start(self, c: Container) -> None:
        lay = self.agent.layout
        image = c.spec.get("image", "")
        if host.podman(lay, "image", "exists", image, check=False).returncode != 0:
            c.state = {"waiting": {"reason": "ErrImageNeverPull", "message":
                       f'image "{image}" is not present on this node; the local cluster never '
                       f"pulls: build it with e2e/images build (tags rillet/*:dev)"}}
            c.backoff_until = time.monotonic() + 5
            return
        try:
            env = pod_env(self.kube, self._pod_with_ips(), c.spec, self.agent.base_env())
        except (VolumeError, ApiError) as e:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            c.backoff_until = time.monotonic() + 2
            return
        image_user = host.podman(lay, "image", "inspect", image, "--format",
                                 "{{.Config.User}}", check=False).stdout.strip()
        refusal = non_root_refusal(self.pod["spec"].get("securityContext") or {},
                                   c.spec.get("securityContext") or {}, image_user)
        if refusal:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": refusal}}
            c.backoff_until = time.monotonic() + 5
            return
        attempt = c.attempts
        cname = f"{self.sandbox}_{c.name}_{attempt}"
        log = self.dir / "logs" / c.name / f"{attempt}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        host.podman(lay, "rm", "-f", "-t", "0", cname, check=False)
        argv = ["create", "--pod", self.sandbox, "--name", cname, "--pull", "never",
                "--label", f"{host.LABEL}=1", "--label", f"rillet.uid={self.uid}",
                "--label", f"rillet.ns={self.ns}", "--log-driver", "k8s-file", "--log-opt", f"path={log}"]
        for k, v in env.items():
            argv += ["-e", f"{k}={v}"]
        argv += self._mounts(c)
        if c.spec.get("workingDir"):
            argv += ["--workdir", c.spec["workingDir"]]
        argv += security_args(self.pod["spec"].get("securityContext") or {},
                              c.spec.get("securityContext") or {})
        if c.spec.get("command"):
            argv += ["--entrypoint", json.dumps([expand(a, env) for a in c.spec["command"]])]
        argv.append(image)
        argv += [expand(a, env) for a in c.spec.get("args", []) or []]
        try:
            host.podman(lay, *argv)
            host.podman(lay, "start", cname)
        except RuntimeError as e:
            c.state = {"waiting": {"reason": "CreateContainerError", "message": str(e)[-400:]}}
            c.backoff_until = time.monotonic() + 5
            return
        if attempt >= 2:  # keep the previous attempt (exec/inspect after a crash), not older ones
            host.podman(lay, "rm", "-f", "-t", "0", f"{self.sandbox}_{c.name}_{attempt - 2}",
                        check=False)
        c.attempts += 1
        c.cname = cname
        c.cid = host.podman(lay, "inspect", cname, "--format", "{{.Id}}").stdout.strip()
        c.image_id = host.podman(lay, "image", "inspect", image, "--format", "{{.Id}}",
                                 check=False).stdout.strip()
        c.created = time.time()
        c.state = {"running": {"startedAt": now_iso(c.created)}}
        c.started = "startupProbe" not in c.spec
        c.ready = False
        c.probes = {k: ProbeState(c.spec[k]) for k in ("startupProbe", "livenessProbe", "readinessProbe")
                    if c.spec.get(k)}
        self.agent.snapshot(refresh=True)

    def _mounts(self, c: Container) -> list[str]:
        argv: list[str] = []
        targets = set()
        for vm in c.spec.get("volumeMounts", []) or []:
            src = self.volumes.get(vm["name"])
            if src is None:
                raise RuntimeError(f"volumeMount {vm['name']} names no volume")
            if vm.get("subPath"):
                src = src / vm["subPath"]
                if not src.exists():
                    src.mkdir(parents=True, exist_ok=True)
            opts = "ro" if vm.get("readOnly") else "rw"
            argv += ["-v", f"{src}:{vm['mountPath']}:{opts}"]
            targets.add(vm["mountPath"])
        for name, target in (("hosts", "/etc/hosts"), ("resolv.conf", "/etc/resolv.conf")):
            if target not in targets:
                argv += ["-v", f"{self.dir / name}:{target}:ro"]
        return argv

    def _exited(self, c: Container, code: int, info: dict) -> None:
        finished = info.get("ExitedAt") or time.time()
        term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                "startedAt": now_iso(c.created), "finishedAt": now_iso(float(finished)),
                "containerID": f"podman://{c.cid}"}
        if code == 137 and info.get("OOMKilled"):
            term["reason"] = "OOMKilled"
        c.ready = False
        c.probes = {}
        policy = self.pod["spec"].get("restartPolicy", "Always")
        if c.init:
            restart = code != 0 and policy != "Never"
            if code == 0:
                c.state, c.done = {"terminated": term}, True
                return
        else:
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if not restart:
            c.state, c.done = {"terminated": term}, True
            return
        ran = time.time() - c.created
        c.crashes = 0 if ran > 300 else c.crashes + 1
        delay = min(BACKOFF_BASE_S * (2 ** max(c.crashes - 1, 0)), BACKOFF_CAP_S)
        c.last_state = {"terminated": term}
        c.state = {"waiting": {"reason": "CrashLoopBackOff", "message":
                   f"back-off {delay:.0f}s restarting failed container={c.name} "
                   f"pod={self.pod_name}_{self.ns}({self.uid})"}}
        c.started = False
        c.backoff_until = time.monotonic() + delay
        c.cname = None  # the exited container stays until the attempt after next starts
        # Kubelet counts a restart when it creates the next attempt; counting at the exit that
        # decides it shows the same growing number one back-off earlier.
        c.restart_count += 1

    def _probe(self, c: Container) -> None:
        if "running" not in c.state or not c.cname:
            return
        now = time.monotonic()
        prefix = ["podman", "exec", c.cname]
        startup = c.probes.get("startupProbe")
        if startup and not c.started:
            if startup.due(now):
                verdict = startup.record(run_probe(startup.spec, c.spec, self.pod_ip, prefix), now)
                if verdict:
                    c.started = True
                elif verdict is False:
                    self._kill(c, "startup probe failed")
            return
        live = c.probes.get("livenessProbe")
        if live and live.due(now):
            if live.record(run_probe(live.spec, c.spec, self.pod_ip, prefix), now) is False:
                self._kill(c, "liveness probe failed")
                return
        ready = c.probes.get("readinessProbe")
        if ready is None:
            c.ready = True
        elif ready.due(now):
            c.ready = bool(ready.record(run_probe(ready.spec, c.spec, self.pod_ip, prefix), now))

    def _kill(self, c: Container, why: str) -> None:
        self.agent.log(f"pod {self.ns}/{self.pod_name}: container {c.name}: {why}; killing")
        grace = int(self.pod["spec"].get("terminationGracePeriodSeconds", 30))
        host.podman(self.agent.layout, "stop", "-t", str(min(grace, 30)), c.cname or "",
                    check=False, timeout=grace + 30)
        c.probes = {}

    def _fail_pod(self, reason: str, message: str) -> None:
        self.phase, self.reason, self.message = "Failed", reason, message

    def _waiting_all(self, reason: str, message: str) -> None:
        for c in self.containers:
            if "running" not in c.state and not c.done:
                c.state = {"waiting": {"reason": reason, "message": message}}

    # ---- status -----------------------------------------------------------------------------------

    def _phase(self) -> str:
        if self.phase == "Failed":
            return "Failed"
        mains = [c for c in self.containers if not c.init]
        if any(c.init and not c.done for c in self.containers):
            return "Pending"
        if all(c.done for c in mains):
            codes = [c.state.get("terminated", {}).get("exitCode", 0) for c in mains]
            return "Succeeded" if all(x == 0 for x in codes) else "Failed"
        if any("running" in c.state or c.last_state for c in mains) or any(c.done for c in mains):
            return "Running"
        return "Pending"

    def _report(self) -> None:
        phase = self._phase()
        mains = [c for c in self.containers if not c.init]
        inits = [c for c in self.containers if c.init]
        initialized = all(c.done for c in inits)
        ready = initialized and all(c.ready for c in mains) and phase == "Running"
        pod = self.pod
        gates = [g["conditionType"] for g in pod["spec"].get("readinessGates", []) or []]
        conds_now = {c["type"]: c for c in pod.get("status", {}).get("conditions", []) or []}
        gates_ok = all(conds_now.get(g, {}).get("status") == "True" for g in gates)
        wanted = {
            "PodReadyToStartContainers": bool(self.pod_ip),
            "Initialized": initialized,
            "ContainersReady": ready,
            "Ready": ready and gates_ok,
        }
        conditions = [c for t, c in conds_now.items() if t not in wanted]
        for t, ok in wanted.items():
            old = conds_now.get(t, {})
            status = "True" if ok else "False"
            cond = {"type": t, "status": status, "lastProbeTime": None,
                    "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == status
                    else now_iso()}
            if not ok and t in ("ContainersReady", "Ready"):
                cond["reason"] = "ContainersNotReady"
            if not ok and t == "Initialized":
                cond["reason"] = "ContainersNotInitialized"
            conditions.append(cond)
        status: dict[str, Any] = {
            "phase": phase, "conditions": conditions, "hostIP": host.GATEWAY,
            "hostIPs": [{"ip": host.GATEWAY}], "startTime": self.start_time,
            "containerStatuses": [c.status() for c in mains],
        }
        if self.pod_ip:
            status["podIP"] = self.pod_ip
            status["podIPs"] = [{"ip": self.pod_ip}]
        if inits:
            status["initContainerStatuses"] = [c.status() for c in inits]
        if self.reason:
            status["reason"], status["message"] = self.reason, self.message
        # lastTransitionTime changes make every report differ; compare without them.
        key = json.dumps({**status, "conditions": [{k: v for k, v in c.items()
                                                    if k != "lastTransitionTime"} for c in conditions]},
                         sort_keys=True)
        if key == self.last_status:
            return
        try:
            self.kube.request("PATCH", self.kube.path("Pod", self.ns, self.pod_name, "status"),
                              {"metadata": {"uid": self.uid}, "status": status},
                              content_type="application/merge-patch+json")
            self.last_status = key
        except ApiError as e:
            if e.status not in (404, 409, 422):
                self.agent.log(f"pod {self.ns}/{self.pod_name}: status patch: {e}")

    # ---- deletion ----------------------------------------------------------------------------------

    def _teardown(self) -> None:
        """Graceful stop (preStop, SIGTERM, SIGKILL after the grace period), then the podman pod
        goes, then the API object is released (grace 0 with our UID as precondition)."""
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        if self._gone.is_set() and not meta.get("deletionTimestamp"):
            grace = 2
        grace = int(grace)
        deadline = time.monotonic() + grace
        lay = self.agent.layout
        for c in self.containers:
            hook = ((c.spec.get("lifecycle") or {}).get("preStop") or {}).get("exec")
            if hook and c.cname and "running" in c.state:
                try:
                    subprocess.run(["podman", "exec", c.cname, *hook["command"]],
                                   env=host.podman_env(lay), capture_output=True,
                                   timeout=max(deadline - time.monotonic(), 1))
                except subprocess.TimeoutExpired:
                    pass
        # The app containers first, the sandbox after, as the kubelet does: podman 4.3's `pod
        # stop` stops the infra container (and so the pod's network) alongside them, so a
        # process still shutting down sent its FINs into nothing and its clients' connections
        # stayed half-open until their request timeouts (Spark's admin client stalled for
        # minutes through a rolling restart).
        running = [c.cname for c in self.containers if c.cname and "running" in c.state]
        left = max(int(deadline - time.monotonic()), 0)
        if running:
            host.podman(lay, "stop", "-t", str(left), *running, check=False, timeout=left + 60)
        left = max(int(deadline - time.monotonic()), 0)
        host.podman(lay, "pod", "stop", "-t", str(left), self.sandbox, check=False, timeout=left + 60)
        host.podman(lay, "pod", "rm", "-f", "-t", "0", self.sandbox, check=False, timeout=120)
        self.agent.dns.unregister(self.uid)
        shutil.rmtree(self.dir, ignore_errors=True)
        if not self._gone.is_set():
            try:
                self.kube.delete("Pod", self.pod_name, self.ns, grace_seconds=0, uid=self.uid,
                                 propagation=None)
            except ApiError as e:
                self.agent.log(f"pod {self.ns}/{self.pod_name}: final delete: {e}")

