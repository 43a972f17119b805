"""The kind cluster of `e2e/kind.sh`, as the e2e fixture and `make demo` drive it.

`up` builds what changed (kind, the node image, the project's images: all cached under
~/.cache/rillet), creates the cluster when it is not running, loads the images, installs the
chart, and returns the kubeconfig path; its progress goes to stderr as it happens. `down`
removes the cluster and fails when the machine is not as `up` found it.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from localk8s import host

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "e2e" / "kind.sh"
# A cold build (Kubernetes from its Go modules, debootstrap, images) takes about 25 minutes on
# 2 cores; a warm `up` of a new cluster about 5.
UP_TIMEOUT_S = 3600
DOWN_TIMEOUT_S = 600


def running() -> bool:
    """True when the cluster exists (it was up before this run: leave it up afterwards)."""
    return subprocess.run([str(SCRIPT), "status"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=120).returncode == 0


def up() -> Path:
    """The cluster's kubeconfig, once it is up. The kubectl built with the cluster (the same
    Kubernetes version) goes first on this process's PATH, which the tests, spark/submit-k8s and
    helm inherit: a kubectl on the machine may be older than the server allows."""
    host.ensure_packages()
    out = subprocess.run([str(SCRIPT), "up"], stdout=subprocess.PIPE, text=True, check=True,
                         timeout=UP_TIMEOUT_S).stdout
    built = subprocess.run([str(REPO / "e2e" / "kind" / "build")], stdout=subprocess.PIPE,
                           text=True, check=True, timeout=UP_TIMEOUT_S).stdout.splitlines()
    os.environ["PATH"] = f"{built[2]}{os.pathsep}{os.environ.get('PATH', '')}"
    return Path(out.strip().splitlines()[-1])


def down() -> None:
    subprocess.run([str(SCRIPT), "down"], check=True, timeout=DOWN_TIMEOUT_S)


def kubeconfig() -> Path:
    out = subprocess.run([str(SCRIPT), "kubeconfig"], stdout=subprocess.PIPE, text=True,
                         check=True, timeout=30).stdout
    return Path(out.strip())
