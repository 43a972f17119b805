"""`e2e/local-cluster up|down|status`: a real Kubernetes control plane on this machine.

up:   host packages -> binaries (e2e/build-k8s) -> PKI -> network (bridge, podman network,
      blackhole route) -> etcd -> kube-apiserver -> bootstrap objects -> controller-manager,
      scheduler -> images (e2e/images) -> node agent (3 zone-labelled Nodes) -> kubeconfig.
down: stops what up started (by the pids it recorded), removes every podman pod/container the
      agent made, the network, bridge, route, mounts, /etc/hosts block and the state folder.

Every wait is bounded; a failed `up` tears down what it started before raising.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import host, images, pki
from .host import Layout, podman, run
from .kube import ApiError, Kube

UP_TIMEOUT_S = 120  # per component readiness wait


def free_ports(n: int) -> list[int]:
    """n distinct free ports (all sockets held open together, so no port is handed out twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_binaries(layout: Layout, what: str = "k8s") -> Path:
    """The bin folder of e2e/build-k8s's `what` (k8s, helm, kubectl), built once into the cache."""
    out = subprocess.run([str(layout.repo / "e2e" / "build-k8s"), what], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=3600).stdout
    return Path(out.strip().splitlines()[-1])


def ensure_kubectl(layout: Layout) -> str:
    """kubectl for the harness, the tests, submit-k8s and the demo: the one on PATH, else one
    built from the same Kubernetes module as the servers and put first on this process's PATH
    (which every command it starts inherits)."""
    found = shutil.which("kubectl")
    if found:
        return found
    print("local-cluster: no kubectl on PATH; building it from the Kubernetes module "
          "(once, a few minutes)", file=sys.stderr, flush=True)
    folder = build_binaries(layout, "kubectl")
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    print(f"local-cluster: kubectl is {folder / 'kubectl'} (export PATH={folder}:$PATH to "
          f"use it from a shell)", file=sys.stderr, flush=True)
    return str(folder / "kubectl")


def kubeconfig_text(server: str, pki_dir: Path, user: str) -> str:
    """A kubeconfig as JSON (valid YAML), with file references into the PKI folder."""
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "rillet-e2e",
        "clusters": [{"name": "rillet-e2e", "cluster": {
            "server": server, "certificate-authority": str(pki_dir / "ca.crt")}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(pki_dir / f"{user}.crt"),
            "client-key": str(pki_dir / f"{user}.key")}}],
        "contexts": [{"name": "rillet-e2e", "context": {"cluster": "rillet-e2e", "user": user}}],
    }
    return json.dumps(cfg, indent=1) + "\n"


# ---- processes ----------------------------------------------------------------------------------

def spawn(layout: Layout, name: str, argv: list[str], env: dict | None = None) -> int:
    """Starts a detached process (own session) logging to <state>/logs/<name>.log."""
    layout.logs.mkdir(parents=True, exist_ok=True)
    log = open(layout.logs / f"{name}.log", "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env or os.environ.copy(), cwd=layout.state)
    log.close()
    _children[proc.pid] = proc
    _record(layout, name, proc.pid, argv[0])
    return proc.pid


_children: dict[int, subprocess.Popen] = {}  # processes this Python process started


def _exit_status(pid: int) -> str:
    proc = _children.get(pid)
    code = proc.poll() if proc else None
    return f"exit status {code}" if code is not None else "not our child or still running"


def _load_state(layout: Layout) -> dict:
    try:
        return json.loads(layout.state_file.read_text())
    except (OSError, ValueError):
        return {}


def _save_state(layout: Layout, state: dict) -> None:
    layout.state.mkdir(parents=True, exist_ok=True)
    tmp = layout.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(layout.state_file)


def _record(layout: Layout, name: str, pid: int, exe: str) -> None:
    state = _load_state(layout)
    state.setdefault("processes", {})[name] = {"pid": pid, "exe": os.path.basename(exe)}
    _save_state(layout, state)


def _alive(pid: int, exe: str) -> bool:
    """True when pid runs and is still the program we started (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    if cmdline == [b""]:
        return True  # just exec'd: the kernel shows an empty cmdline for a moment
    return any(os.path.basename(a.decode(errors="replace")) == exe or exe in a.decode(errors="replace")
               for a in cmdline[:3])


def _stop_process(pid: int, exe: str, grace: float) -> None:
    if not _alive(pid, exe):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid, exe):
        time.sleep(0.1)
    if _alive(pid, exe):
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid, exe):
            time.sleep(0.1)


def _wait_http_ok(kube: Kube, path: str, what: str, pid: int, exe: str, log: Path) -> None:
    deadline = time.monotonic() + UP_TIMEOUT_S
    last: object = None
    while time.monotonic() < deadline:
        if not _alive(pid, exe):
            raise RuntimeError(f"{what} exited ({_exit_status(pid)}); last log lines:\n{_tail(log)}")
        try:
            kube.request("GET", path, timeout=5, raw=True)
            return
        except (OSError, ApiError) as e:
            last = e
        time.sleep(0.3)
    raise TimeoutError(f"{what} not ready after {UP_TIMEOUT_S}s ({last}); log:\n{_tail(log)}")


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


# ---- network --------------------------------------------------------------------------------------

def network_up(layout: Layout) -> None:
    """The podman network, then its bridge with the gateway address made up front (so the API
    forwarder can bind before any pod exists), and the blackhole route for the service range."""
    if podman(layout, "network", "exists", host.NETWORK, check=False).returncode != 0:
        podman(layout, "network", "create", "--driver", "bridge", "--subnet", host.POD_CIDR,
               "--gateway", host.GATEWAY, "--internal", "--disable-dns", host.NETWORK)
        # podman 4.3 cannot name the bridge on the command line; netavark reads the name from
        # the network's config file, and we need our own name to create the bridge up front.
        conf = Path("/etc/containers/networks") / f"{host.NETWORK}.json"
        net = json.loads(conf.read_text())
        net["network_interface"] = host.BRIDGE
        conf.write_text(json.dumps(net, indent=1))
    if run("ip", "link", "show", host.BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", host.BRIDGE, "type", "bridge")
    prefix = host.POD_CIDR.split("/")[1]
    addrs = run("ip", "-o", "addr", "show", "dev", host.BRIDGE).stdout
    if f" {host.GATEWAY}/" not in addrs:
        run("ip", "addr", "add", f"{host.GATEWAY}/{prefix}", "dev", host.BRIDGE)
    run("ip", "link", "set", host.BRIDGE, "up")
    if run("ip", "link", "show", host.ANCHOR, check=False).returncode != 0:
        run("ip", "link", "add", host.ANCHOR, "type", "veth", "peer", "name", host.ANCHOR_PEER)
    run("ip", "link", "set", host.ANCHOR, "master", host.BRIDGE)
    run("ip", "link", "set", host.ANCHOR, "up")
    run("ip", "link", "set", host.ANCHOR_PEER, "up")
    routes = run("ip", "route", "show", "type", "blackhole").stdout
    if host.SERVICE_CIDR not in routes:
        run("ip", "route", "add", "blackhole", host.SERVICE_CIDR)


def network_down(layout: Layout) -> None:
    if shutil.which("podman"):
        podman(layout, "network", "rm", "-f", host.NETWORK, check=False)
    if run("ip", "link", "show", host.ANCHOR, check=False).returncode == 0:
        run("ip", "link", "delete", host.ANCHOR, check=False)
    if run("ip", "link", "show", host.BRIDGE, check=False).returncode == 0:
        run("ip", "link", "delete", host.BRIDGE, check=False)
    if host.SERVICE_CIDR in run("ip", "route", "show", "type", "blackhole").stdout:
        run("ip", "route", "del", "blackhole", host.SERVICE_CIDR, check=False)


# ---- up ---------------------------------------------------------------------------------------------

def up(layout: Layout, build_images: bool = True) -> Path:
    """Brings the cluster up (idempotent: a running cluster is left as is). Returns kubeconfig."""
    # Host tools first: on a fresh machine even the clean-up below needs podman and ip.
    host.ensure_packages()
    ensure_kubectl(layout)
    if status(layout, quiet=True):
        return layout.kubeconfig
    down(layout, quiet=True)  # a half-started previous run must not leak into this one
    t0 = time.monotonic()
    try:
        return _up(layout, build_images, t0)
    except BaseException:
        print(f"local-cluster: up failed; logs in {layout.logs} are removed by down — copying "
              f"them to {layout.state}.failed-logs", file=sys.stderr)
        shutil.rmtree(f"{layout.state}.failed-logs", ignore_errors=True)
        if layout.logs.exists():
            shutil.copytree(layout.logs, f"{layout.state}.failed-logs")
        down(layout, quiet=True)
        raise


def _step(t0: float, what: str) -> None:
    print(f"local-cluster: {what} ({time.monotonic() - t0:.1f}s)", file=sys.stderr, flush=True)


def _up(layout: Layout, build_images: bool, t0: float) -> Path:
    host.ensure_packages()
    host.write_containers_conf(layout)
    bin_dir = build_binaries(layout)
    _step(t0, f"binaries in {bin_dir}")
    for d in (layout.state, layout.logs, layout.pods, layout.volumes):
        d.mkdir(parents=True, exist_ok=True)
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{host.CLUSTER_DOMAIN}"]
    pki.make_pki(layout.pki, ["127.0.0.1", host.GATEWAY, host.FIRST_SERVICE_IP], names)
    network_up(layout)
    _step(t0, "pki and network")

    ports = dict(zip(("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler"),
                     free_ports(5)))
    state = _load_state(layout)
    state["ports"] = ports
    state["bin"] = str(bin_dir)
    _save_state(layout, state)

    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    pid = spawn(layout, "etcd", [
        "etcd", "--name", "rillet-e2e", "--data-dir", str(layout.state / "etcd"),
        "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
        "--listen-peer-urls", f"http://127.0.0.1:{ports['etcd_peer']}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{ports['etcd_peer']}",
        "--initial-cluster", f"rillet-e2e=http://127.0.0.1:{ports['etcd_peer']}",
        "--quota-backend-bytes", str(2 << 30), "--log-level", "warn"])
    host.wait_until("etcd", lambda: _etcd_healthy(etcd_url, pid), UP_TIMEOUT_S)
    _step(t0, "etcd")

    p = layout.pki
    server = f"https://127.0.0.1:{ports['apiserver']}"
    pid = spawn(layout, "kube-apiserver", [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1", f"--secure-port={ports['apiserver']}",
        f"--advertise-address={host.GATEWAY}",  # the `kubernetes` endpoints: the forwarder
        f"--service-cluster-ip-range={host.SERVICE_CIDR}",
        f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
        f"--client-ca-file={p / 'ca.crt'}",
        f"--service-account-key-file={p / 'sa.pub'}",
        f"--service-account-signing-key-file={p / 'sa.key'}",
        f"--service-account-issuer=https://kubernetes.default.svc.{host.CLUSTER_DOMAIN}",
        f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={p / 'ca.crt'}",
        "--kubelet-preferred-address-types=InternalIP",
        "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        f"--cert-dir={layout.state / 'apiserver-certs'}",
        "--profiling=false", "--v=1"])
    admin = layout.state / "admin.kubeconfig"
    admin.write_text(kubeconfig_text(server, p, "admin"))
    kube = Kube(server, str(p / "ca.crt"), str(p / "admin.crt"), str(p / "admin.key"))
    _wait_http_ok(kube, "/readyz", "kube-apiserver", pid, "kube-apiserver",
                  layout.logs / "kube-apiserver.log")
    _step(t0, "kube-apiserver")
    _bootstrap_objects(kube)

    for comp, user, extra in (
        ("kube-controller-manager", "controller-manager", [
            "--controllers=*,bootstrapsigner,tokencleaner",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--cluster-signing-cert-file={p / 'ca.crt'}",
            f"--cluster-signing-key-file={p / 'ca.key'}",
            f"--secure-port={ports['controller_manager']}",
            "--terminated-pod-gc-threshold=100",
            "--node-monitor-grace-period=40s"]),
        ("kube-scheduler", "scheduler", [f"--secure-port={ports['scheduler']}"]),
    ):
        cfg = layout.state / f"{user}.kubeconfig"
        cfg.write_text(kubeconfig_text(server, p, user))
        spawn(layout, comp, [
            str(bin_dir / comp), f"--kubeconfig={cfg}", f"--authentication-kubeconfig={cfg}",
            f"--authorization-kubeconfig={cfg}", "--leader-elect=false",
            "--bind-address=127.0.0.1", "--v=1", *extra])
    _step(t0, "controller-manager and scheduler started")

    if build_images:
        images.build_all(layout)
        _step(t0, "images")

    spawn(layout, "node-agent", [sys.executable, "-m", "localk8s.agent", "--state",
                                 str(layout.state), "--kubeconfig", str(admin)],
          env={**host.podman_env(layout), "PYTHONPATH": str(layout.repo / "e2e")})
    kube.wait_for("3 Ready nodes", lambda: _ready_nodes(kube) >= len(host.NODES), UP_TIMEOUT_S)
    kube.wait_for("the default service account", lambda: kube.get_or_none(
        "ServiceAccount", "default", "default"), UP_TIMEOUT_S)
    layout.kubeconfig.write_text(kubeconfig_text(server, p, "admin"))
    _step(t0, "cluster up")
    return layout.kubeconfig


def _etcd_healthy(url: str, pid: int) -> bool:
    if not _alive(pid, "etcd"):
        raise RuntimeError(f"etcd exited ({_exit_status(pid)})")
    import urllib.request
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return b"true" in r.read()
    except OSError:
        return False


def _ready_nodes(kube: Kube) -> int:
    n = 0
    for node in kube.list("Node"):
        for c in node.get("status", {}).get("conditions", []):
            if c["type"] == "Ready" and c["status"] == "True":
                n += 1
    return n


def _bootstrap_objects(kube: Kube) -> None:
    """The default StorageClass: PVs are local folders made by the agent's provisioner, bound
    once the scheduler picked a node (WaitForFirstConsumer), deleted with their claim."""
    kube.apply({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "rillet-local", "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rillet.io/local-path", "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer"})


# ---- down / status -------------------------------------------------------------------------------

def down(layout: Layout, quiet: bool = False) -> None:
    """Stops everything up started and removes what it made. Safe to call repeatedly."""
    state = _load_state(layout)
    procs = state.get("processes", {})
    # The agent first (it would otherwise restart containers), then the control plane.
    for name in ("node-agent", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
        if name in procs:
            _stop_process(procs[name]["pid"], procs[name]["exe"], grace=10)
    remove_pods(layout)
    network_down(layout)
    host.hosts_block_remove()
    unmount_under(layout.state)
    _keep_logs(layout)
    shutil.rmtree(layout.state, ignore_errors=True)
    if not quiet:
        print("local-cluster: down", file=sys.stderr)


def _keep_logs(layout: Layout) -> None:
    """Copies the control plane and agent logs of the last run to <cache>/e2e-logs/last (files
    only, nothing running) so a failed CI run can still be read after the state is gone."""
    if not layout.logs.is_dir():
        return
    dest = layout.cache / "e2e-logs" / "last"
    shutil.rmtree(dest, ignore_errors=True)
    try:
        shutil.copytree(layout.logs, dest)
    except OSError:
        pass


def remove_pods(layout: Layout) -> None:
    if not shutil.which("podman"):
        return
    ids = podman(layout, "pod", "ps", "-q", "--filter", f"label={host.LABEL}=1",
                 check=False).stdout.split()
    if ids:
        podman(layout, "pod", "rm", "-f", "-t", "0", *ids, check=False, timeout=300)
    ids = podman(layout, "ps", "-aq", "--filter", f"label={host.LABEL}=1", check=False).stdout.split()
    if ids:
        podman(layout, "rm", "-f", "-t", "0", *ids, check=False, timeout=300)


def unmount_under(root: Path) -> None:
    """Unmounts anything still mounted below root (deepest first)."""
    prefix = str(root).rstrip("/") + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        run("umount", "-l", m, check=False)


def leftovers(layout: Layout) -> list[str]:
    """Everything `down` must have removed that is still there (empty list = clean)."""
    found = []
    for name, info in _load_state(layout).get("processes", {}).items():
        if _alive(info["pid"], info["exe"]):
            found.append(f"process {name} pid {info['pid']}")
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            try:
                cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(layout.state) in cmd or "localk8s.agent" in cmd:
                found.append(f"process {pid_dir.name}: {cmd[:120]}")
    if shutil.which("podman"):
        for what in (("pod", "ps", "-q"), ("ps", "-aq")):
            out = podman(layout, *what, "--filter", f"label={host.LABEL}=1", check=False).stdout
            found += [f"podman {what[0]} {i}" for i in out.split()]
        if podman(layout, "network", "exists", host.NETWORK, check=False).returncode == 0:
            found.append(f"podman network {host.NETWORK}")
    for link in (host.BRIDGE, host.ANCHOR):
        if run("ip", "link", "show", link, check=False).returncode == 0:
            found.append(f"network link {link}")
    if host.SERVICE_CIDR in run("ip", "route", "show", "type", "blackhole").stdout:
        found.append(f"route blackhole {host.SERVICE_CIDR}")
    mounts = Path("/proc/self/mounts").read_text()
    found += [f"mount {line.split()[1]}" for line in mounts.splitlines()
              if line.split()[1].startswith(str(layout.state))]
    if host.HOSTS_BEGIN in Path("/etc/hosts").read_text():
        found.append("/etc/hosts block")
    if layout.state.exists():
        found.append(f"folder {layout.state}")
    return found


def status(layout: Layout, quiet: bool = False) -> bool:
    """True when every recorded process runs and the API server answers."""
    state = _load_state(layout)
    procs = state.get("processes", {})
    want = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "node-agent")
    ok = all(n in procs and _alive(procs[n]["pid"], procs[n]["exe"]) for n in want)
    if ok:
        try:
            Kube.from_kubeconfig(str(layout.kubeconfig)).request("GET", "/readyz", raw=True, timeout=5)
        except Exception:  # noqa: BLE001 - any failure means "not up"
            ok = False
    if not quiet:
        for n in want:
            info = procs.get(n)
            alive = bool(info and _alive(info["pid"], info["exe"]))
            print(f"{n:26} {'running pid %d' % info['pid'] if alive else 'stopped'}")
        print(f"kubeconfig                 {layout.kubeconfig if ok else '-'}")
    return ok


def main(argv: list[str]) -> int:
    layout = Layout.default()
    cmd = argv[0] if argv else "status"
    if cmd == "up":
        print(up(layout, build_images="--no-images" not in argv))
        return 0
    if cmd == "down":
        down(layout)
        left = leftovers(layout)
        for item in left:
            print(f"local-cluster: left behind: {item}", file=sys.stderr)
        return 1 if left else 0
    if cmd == "status":
        return 0 if status(layout) else 1
    print("usage: local-cluster up [--no-images] | down | status", file=sys.stderr)
    return 2
