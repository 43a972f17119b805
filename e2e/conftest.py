"""The e2e suite's cluster: $KUBECONFIG when set, else the kind cluster of e2e/kind.sh.

- Without $KUBECONFIG the session fixture `k8s` runs `e2e/kind.sh up` (builds what changed,
  creates the cluster when it is not running, loads the project's images, installs the chart)
  and `e2e/kind.sh down` at the end, unless the cluster was already running before the session
  (then it is left running).
- `namespace` gives each test its own namespace, deleted afterwards.
- `spark_operator_release`: the Kubeflow Spark operator (e2e/spark_operator.py), installed once
  for the session on first use, watching every namespace, uninstalled at the end.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spark_operator  # noqa: E402
from localk8s import kind  # noqa: E402
from localk8s.kube import Kube  # noqa: E402

# The first e2e test pays for `kind.sh up`: a cold build of Kubernetes, kind and the images
# (about 25 minutes on 2 cores), or a new cluster with the images loaded (about 5).
FIRST_TEST_TIMEOUT_S = 3000
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Cluster:
    """What the tests get: a client and the kubeconfig path."""

    kube: Kube
    kubeconfig: str
    # The cluster was running before the session; the fixture leaves it running, so no test
    # may take it down.
    already_up: bool


def _e2e_items(items: list) -> list:
    root = Path(__file__).resolve().parent
    return [i for i in items if Path(str(i.fspath)).resolve().is_relative_to(root)]


def pytest_collection_modifyitems(config, items) -> None:
    e2e = [i for i in _e2e_items(items) if "k8s" in getattr(i, "fixturenames", ())]
    if e2e and not os.environ.get("KUBECONFIG"):
        e2e[0].add_marker(pytest.mark.timeout(FIRST_TEST_TIMEOUT_S))


def pytest_collection_finish(session) -> None:
    """When the selected tests will bring kind up and other tests come first (unit and
    integration, in `make test`), build kind and the images in the background meanwhile."""
    items = session.items
    e2e = [i for i in _e2e_items(items) if "k8s" in getattr(i, "fixturenames", ())]
    if (e2e and e2e[0] is not items[0] and not os.environ.get("KUBECONFIG")
            and not session.config.option.collectonly):
        kind.start_prebuild()


def pytest_unconfigure(config) -> None:
    kind.stop_prebuild()


@pytest.fixture(scope="session")
def k8s() -> Iterator[Cluster]:
    path = os.environ.get("KUBECONFIG")
    if path:
        yield Cluster(Kube.from_kubeconfig(path), path, already_up=True)
        return
    already_up = kind.running()
    try:
        # inside the try: a cluster half made by a failed `up` is taken down too, or the next
        # run would take it for the user's and leave it running
        path = str(kind.up())
        yield Cluster(Kube.from_kubeconfig(path), path, already_up=already_up)
    finally:
        if not already_up:
            kind.down()


def build_helm() -> str:
    """helm built from its Go module (e2e/helm) into the cache, once; returns its path."""
    out = subprocess.run([str(REPO / "e2e" / "build-k8s"), "helm"], check=True,
                         stdout=subprocess.PIPE, text=True, timeout=3600).stdout
    return str(Path(out.strip().splitlines()[-1]) / "helm")


@pytest.fixture(scope="session")
def helm(k8s: Cluster) -> str:
    """Path of a helm binary: the one on PATH when there is one, else the one built from its
    Go module (cached). Call it with env KUBECONFIG=k8s.kubeconfig."""
    return shutil.which("helm") or build_helm()


@pytest.fixture(scope="session")
def spark_operator_release(k8s: Cluster, helm: str) -> Iterator[None]:
    """The Spark operator for every module that runs SparkApplications (its install, with its
    webhook's certificate, takes a minute or more: paid once). It watches all namespaces, since
    each module makes its own; the modules delete theirs (and their applications) before the
    session ends, so the operator is still there to finish them."""
    print("\n" + spark_operator.install(k8s.kube, helm, k8s.kubeconfig, []), flush=True)
    try:
        yield
    finally:
        spark_operator.uninstall(k8s.kube, helm, k8s.kubeconfig)


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
