"""Where things live on this machine and the podman/apt helpers of the e2e harness (kind's
images: images.py, kind_images.py; e2e/kind.sh).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# What e2e/kind.sh and the image builds need on the host: podman with netavark, runc and conmon
# (kind's podman provider runs the nodes), debootstrap (the node image's and the base image's
# Debian), gcc (the pause process), iptables and iproute2 (the node network's host side).
APT_PACKAGES = ("podman", "runc", "netavark", "catatonit", "conmon", "debootstrap", "gcc",
                "iptables", "iproute2")
# Executable that proves each package is there (skip apt when all are present).
APT_PROBES = {"podman": "podman", "runc": "runc", "netavark": "/usr/lib/podman/netavark",
              "catatonit": "catatonit", "conmon": "conmon", "debootstrap": "debootstrap",
              "gcc": "gcc", "iproute2": "ip", "iptables": "iptables"}


@dataclass(frozen=True)
class Layout:
    """`repo` is this checkout; `cache` survives runs (binaries, base image, image archives)."""

    repo: Path
    cache: Path

    @classmethod
    def default(cls) -> "Layout":
        repo = Path(__file__).resolve().parents[2]
        cache = Path(os.environ.get("RILLET_CACHE", str(Path.home() / ".cache" / "rillet")))
        return cls(repo, cache)

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
    print(f"e2e: installing host packages {' '.join(missing)} (apt, about a minute)",
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
