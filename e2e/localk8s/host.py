"""Where things live on this machine, the fixed network plan, and the podman/apt helpers.

Network plan (no private-range or public address is ever used):
  pods      198.18.0.0/16 on bridge rillet0 (RFC 2544 test range), gateway 198.18.0.1 = the host;
            the podman network is --internal: no default route and no NAT, so no pod packet can
            leave the machine.
  services  198.19.0.0/16, blackhole-routed on the host. Nothing dials a ClusterIP: names resolve
            to ready pod IPs through /etc/hosts entries the node agent keeps up to date.
  API       kube-apiserver listens on 127.0.0.1:<port>; the agent forwards 198.18.0.1:<port> to
            it, which is what KUBERNETES_SERVICE_HOST/PORT give pods.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

NETWORK = "rillet-e2e"
BRIDGE = "rillet0"
# A veth port on the bridge (no dummy driver here): netavark deletes a bridge when its last container leaves, which
# would take the gateway address (API forwarder, log endpoint) with it.
ANCHOR = "rillet0-anc"
ANCHOR_PEER = "rillet0-anp"
POD_CIDR = "198.18.0.0/16"
GATEWAY = "198.18.0.1"
SERVICE_CIDR = "198.19.0.0/16"
FIRST_SERVICE_IP = "198.19.0.1"
CLUSTER_DOMAIN = "cluster.local"
# One Node object per zone, as a three-zone cluster would have.
NODES = (("rillet-e2e-a", "zone-a"), ("rillet-e2e-b", "zone-b"), ("rillet-e2e-c", "zone-c"))
LABEL = "rillet.e2e"  # every podman pod/container the agent makes carries this label
HOSTS_BEGIN = "# BEGIN rillet-e2e (managed by e2e/local-cluster; removed by down)"
HOSTS_END = "# END rillet-e2e"

APT_PACKAGES = ("podman", "runc", "netavark", "aardvark-dns", "catatonit", "conmon", "debootstrap",
                "etcd-server", "iptables", "openssl", "iproute2")
# Executable that proves each package is there (skip apt when all are present).
APT_PROBES = {"podman": "podman", "runc": "runc", "netavark": "/usr/lib/podman/netavark",
              "catatonit": "catatonit", "conmon": "conmon", "debootstrap": "debootstrap",
              "etcd-server": "etcd", "openssl": "openssl", "iproute2": "ip", "iptables": "iptables",
              "aardvark-dns": "/usr/lib/podman/aardvark-dns"}


@dataclass(frozen=True)
class Layout:
    """Folders: `state` is thrown away by down; `cache` survives runs (binaries, base image)."""

    repo: Path
    state: Path
    cache: Path

    @classmethod
    def default(cls) -> "Layout":
        repo = Path(__file__).resolve().parents[2]
        state = Path(os.environ.get("RILLET_E2E_STATE", "/var/tmp/rillet-e2e"))
        cache = Path(os.environ.get("RILLET_CACHE", str(Path.home() / ".cache" / "rillet")))
        return cls(repo, state, cache)

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state / "cluster.json"

    @property
    def pods(self) -> Path:
        return self.state / "pods"

    @property
    def volumes(self) -> Path:
        return self.state / "pv"

    @property
    def containers_conf(self) -> Path:
        return self.cache / "containers.conf"


def ensure_packages() -> None:
    """apt-get installs the host tools when any is missing (we run as root on CI)."""
    missing = [p for p, probe in APT_PROBES.items()
               if not (os.path.exists(probe) if probe.startswith("/") else shutil.which(probe))]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"local-cluster: installing host packages {' '.join(missing)} (apt, about a minute)",
          file=sys.stderr, flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, timeout=1200)


def write_containers_conf(layout: Layout) -> Path:
    """Our own containers.conf (CONTAINERS_CONF), so /etc is left alone.

    Containers fail to start here unless their rlimits fit inside our hard limits (no
    CAP_SYS_RESOURCE), and the cgroup v1 host has no systemd: cgroupfs manager, file events.
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    # The values the issue verified on this machine kind; never above our own hard limits.
    nofile = min(nofile if nofile > 0 else 20000, 20000)
    nproc = min(nproc if nproc > 0 else 4096, 4096)
    text = (
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "\n[engine]\n"
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        "\n[network]\n"
        'network_backend = "netavark"\n'
    )
    layout.cache.mkdir(parents=True, exist_ok=True)
    path = layout.containers_conf
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def podman_env(layout: Layout) -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(layout.containers_conf)}


def podman(layout: Layout, *args: str, check: bool = True, timeout: float = 120,
           capture: bool = True) -> subprocess.CompletedProcess:
    """Runs podman with our containers.conf; raises with podman's stderr on failure."""
    proc = subprocess.run(["podman", *args], env=podman_env(layout), capture_output=capture,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=timeout)


def write_in_place(path: Path, text: str) -> None:
    """Rewrites a file keeping its inode, so bind mounts of it see the new content."""
    if path.exists() and path.read_text() == text:
        return
    with open(path, "r+" if path.exists() else "w") as f:
        f.seek(0)
        f.write(text)
        f.truncate()


def hosts_block_set(entries: list[str]) -> None:
    """Puts our managed block into the host's /etc/hosts (tests resolve cluster DNS names)."""
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines()
    kept = _without_block(lines)
    block = [HOSTS_BEGIN, *entries, HOSTS_END] if entries else []
    new = "\n".join(kept + block) + "\n"
    if new != hosts.read_text():
        write_in_place(hosts, new)


def hosts_block_remove() -> None:
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines()
    kept = _without_block(lines)
    if kept != lines:
        write_in_place(hosts, "\n".join(kept) + "\n")


def _without_block(lines: list[str]) -> list[str]:
    out, inside = [], False
    for line in lines:
        if line == HOSTS_BEGIN:
            inside = True
        elif line == HOSTS_END:
            inside = False
        elif not inside:
            out.append(line)
    return out


def wait_until(what: str, check, timeout: float, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
