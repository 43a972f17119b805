"""The e2e suite's cluster: $KUBECONFIG when set, else the kind cluster of e2e/kind.sh.

- Without $KUBECONFIG the session fixture `k8s` runs `e2e/kind.sh up` (builds what changed,
  creates the cluster when it is not running, loads the project's images, installs the chart)
  and `e2e/kind.sh down` at the end, unless the cluster was already running before the session
  (then it is left running).
- RILLET_E2E_CLUSTER=local uses the older stand-in instead (e2e/local-cluster: a podman node
  agent in place of the kubelet). With RILLET_E2E_BACKGROUND=1 its slow, process-free
  preparation (Go build of the control plane, podman images) starts in a background thread at
  the end of collection, overlapping the unit and integration tests. Off by default: a cold Go
  build takes both cores of a CI machine for ~10 minutes, and timing-sensitive integration
  tests then flake.
- `namespace` gives each test its own namespace, deleted afterwards.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from localk8s import cluster, host, images, kind  # noqa: E402
from localk8s.host import Layout  # noqa: E402
from localk8s.kube import Kube  # noqa: E402

# The first e2e test pays for a cold build when the unit/integration tests finished first.
FIRST_TEST_TIMEOUT_S = 3000
_prepare: dict[str, object] = {}


@dataclass(frozen=True)
class Cluster:
    """What the tests get: a client, the kubeconfig path, and whether it is the local one."""

    kube: Kube
    kubeconfig: str
    local: bool
    layout: Layout | None
    image_errors: dict  # tag -> error for project images that did not build (local only)
    # The cluster was running before the session; the fixture leaves it running, so no test
    # may take it down.
    already_up: bool


def _stand_in() -> bool:
    return os.environ.get("RILLET_E2E_CLUSTER", "kind") == "local"


def _e2e_items(items: list) -> list:
    root = Path(__file__).resolve().parent
    return [i for i in items if Path(str(i.fspath)).resolve().is_relative_to(root)]


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "e2e_last: run at the very end of the session "
                            "(the test takes the local cluster down)")


def pytest_collection_modifyitems(config, items) -> None:
    last = [i for i in items if i.get_closest_marker("e2e_last")]
    items[:] = [i for i in items if not i.get_closest_marker("e2e_last")] + last
    e2e = [i for i in _e2e_items(items) if "k8s" in getattr(i, "fixturenames", ())]
    if e2e and not os.environ.get("KUBECONFIG"):
        e2e[0].add_marker(pytest.mark.timeout(FIRST_TEST_TIMEOUT_S))


def pytest_collection_finish(session) -> None:
    needs_cluster = [i for i in _e2e_items(session.items) if "k8s" in getattr(i, "fixturenames", ())]
    if not needs_cluster or os.environ.get("KUBECONFIG") or _prepare or not _stand_in() \
            or session.config.option.collectonly:
        return
    if os.environ.get("RILLET_E2E_BACKGROUND", "0") != "1":
        return  # prepare in the fixture instead, after the tests that run first
    layout = Layout.default()

    def prepare() -> None:
        t0 = time.monotonic()
        try:
            host.ensure_packages()
            host.write_containers_conf(layout)
            cluster.build_binaries(layout)
            build_helm(layout)  # test_helm.py and the chart tests use it
            _prepare["images"] = images.build_all(layout)
        except BaseException as e:  # noqa: BLE001 - reported by the fixture
            _prepare["error"] = e
        _prepare["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=prepare, name="e2e-prepare", daemon=True)
    _prepare["thread"] = thread
    thread.start()


@pytest.fixture(scope="session")
def k8s() -> Iterator[Cluster]:
    path = os.environ.get("KUBECONFIG")
    if path:
        yield Cluster(Kube.from_kubeconfig(path), path, False, None, {}, already_up=True)
        return
    if not _stand_in():
        yield from _kind_cluster()
        return
    layout = Layout.default()
    thread = _prepare.get("thread")
    if isinstance(thread, threading.Thread):
        thread.join(FIRST_TEST_TIMEOUT_S - 60)
        if thread.is_alive():
            pytest.fail("e2e preparation (Go build / images) did not finish in time")
    if "error" in _prepare:
        raise RuntimeError(f"e2e preparation failed: {_prepare['error']}") from _prepare["error"]
    already_up = cluster.status(layout, quiet=True)
    errors = _prepare.get("images")
    if not isinstance(errors, dict):
        host.ensure_packages()
        errors = images.build_all(layout)
    # Images were just built (here or by the background preparation): up must not build again.
    kubeconfig = cluster.up(layout, build_images=False)
    try:
        yield Cluster(Kube.from_kubeconfig(str(kubeconfig)), str(kubeconfig), True, layout,
                      {t: e for t, e in errors.items() if e}, already_up=already_up)
    finally:
        if not already_up:
            cluster.down(layout, quiet=True)


def _kind_cluster() -> Iterator[Cluster]:
    already_up = kind.running()
    path = str(kind.up())
    try:
        yield Cluster(Kube.from_kubeconfig(path), path, False, None, {}, already_up=already_up)
    finally:
        if not already_up:
            kind.down()


def build_helm(layout: Layout) -> str:
    """helm built from its Go module (e2e/helm) into the cache, once; returns its path."""
    out = subprocess.run([str(layout.repo / "e2e" / "build-k8s"), "helm"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=3600).stdout
    return str(Path(out.strip().splitlines()[-1]) / "helm")


@pytest.fixture(scope="session")
def helm(k8s: Cluster) -> str:
    """Path of a helm binary: the one on PATH when there is one (kind elsewhere), else the one
    built from its Go module (cached). Call it with env KUBECONFIG=k8s.kubeconfig."""
    if not k8s.local and shutil.which("helm"):
        return shutil.which("helm")
    return build_helm(k8s.layout or Layout.default())


@pytest.fixture
def namespace(k8s: Cluster, request) -> Iterator[str]:
    """A fresh namespace per test; deleted afterwards (not waited for: down cleans the rest)."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"e2e-{base}-{uuid.uuid4().hex[:5]}"
    k8s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    k8s.kube.wait_for(f"service account default in {name}",
                      lambda: k8s.kube.get_or_none("ServiceAccount", "default", name), 60)
    yield name
    k8s.kube.delete("Namespace", name)
