"""The kind cluster of `e2e/kind.sh`, as the e2e fixture and `make demo` drive it.

`up` builds what changed (kind, the node image, the project's images: all cached under
~/.cache/rillet), creates the cluster when it is not running, loads the images, installs the
chart, and returns the kubeconfig path; its progress goes to stderr as it happens. `down`
removes the cluster and fails when the machine is not as `up` found it.

`start_prebuild` runs `e2e/kind.sh build` in the background at the lowest CPU priority:
the test session starts it at collection, so a cold build (about 20 minutes of Go on 2 cores)
overlaps the unit and integration tests instead of following them; `up` waits for it first.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from localk8s import host

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "e2e" / "kind.sh"
# A cold build (Kubernetes from its Go modules, debootstrap, images) takes about 25 minutes on
# 2 cores; a warm `up` of a new cluster about 5.
UP_TIMEOUT_S = 3600
DOWN_TIMEOUT_S = 600
STATE = Path(os.environ.get("RILLET_KIND_STATE", "/var/tmp/rillet-kind"))
PREBUILD_LOG = STATE / "prebuild.log"

_prebuild: subprocess.Popen | None = None


def start_prebuild() -> None:
    """`kind.sh build` in the background at nice 19: it gets the CPU the tests leave idle. It
    also asks for the idle I/O class, which only an I/O scheduler that has classes (BFQ)
    honours: this machine's disks use `none`, so its writes (Go's cache, podman's layers)
    compete with the tests' as any process's do. Its output goes to PREBUILD_LOG; a failure
    is `up`'s to report, since `up` builds again and fails with its own output."""
    global _prebuild
    if _prebuild is not None:
        return
    host.ensure_packages()
    STATE.mkdir(parents=True, exist_ok=True)
    with PREBUILD_LOG.open("w") as log:
        _prebuild = subprocess.Popen(["nice", "-n", "19", "ionice", "-c", "3", str(SCRIPT), "build"],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
    print(f"e2e: building kind and the images in the background (log {PREBUILD_LOG})",
          file=sys.stderr, flush=True)


def _wait_prebuild() -> None:
    global _prebuild
    if _prebuild is None:
        return
    try:
        rc = _prebuild.wait(timeout=UP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_prebuild()
        return
    _prebuild = None
    print(f"e2e: background build ended with exit code {rc} (log {PREBUILD_LOG})",
          file=sys.stderr, flush=True)


def stop_prebuild() -> None:
    """The background build is stopped with the session (its whole process group: go, podman)."""
    global _prebuild
    if _prebuild is not None and _prebuild.poll() is None:
        os.killpg(_prebuild.pid, signal.SIGTERM)
        try:
            _prebuild.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(_prebuild.pid, signal.SIGKILL)
            _prebuild.wait(timeout=60)
    _prebuild = None


def running() -> bool:
    """True when the cluster exists (it was up before this run: leave it up afterwards)."""
    return subprocess.run([str(SCRIPT), "status"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=120).returncode == 0


def up() -> Path:
    """The cluster's kubeconfig, once it is up. The kubectl built with the cluster (the same
    Kubernetes version) goes first on this process's PATH, which the tests, spark/submit-k8s and
    helm inherit: a kubectl on the machine may be older than the server allows."""
    host.ensure_packages()
    _wait_prebuild()
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
