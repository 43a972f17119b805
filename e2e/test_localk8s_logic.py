"""Pure pieces of the local cluster harness (no cluster needed): Kubernetes' $(VAR) expansion,
downward-API field paths, the CRI log format, the Dockerfile inputs the image cache hashes,
probe thresholds, and the names kind's image archives carry."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

from localk8s.agent import _cri_log_lines
import subprocess

import pytest

from localk8s.kind_images import containerd_name, rename
from localk8s.images import (DebootstrapProgress, ImageSpec, _build_step, _copy_sources,
                             discover, inputs_hash, lineage_base, run_reporting)
from localk8s.probes import ProbeState
from localk8s.security import non_root_refusal, security_args
from localk8s.volumes import VolumeWriter, expand, field_value

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"b": "2", "a": "1"}},
       "spec": {"nodeName": "rillet-e2e-b"}, "status": {"podIP": "198.18.0.9", "hostIP": "198.18.0.1"}}


def test_expand_follows_kubernetes_rules():
    env = {"A": "x", "B": "y"}
    assert expand("$(A)-$(B)", env) == "x-y"
    assert expand("$(MISSING)", env) == "$(MISSING)"  # unknown references stay as written
    assert expand("$$(A)", env) == "$(A)"  # $$ escapes
    assert expand("no refs", env) == "no refs"


def test_field_paths():
    assert field_value(POD, "metadata.name") == "p"
    assert field_value(POD, "metadata.labels['b']") == "2"
    assert field_value(POD, "metadata.labels") == 'a="1"\nb="2"'
    assert field_value(POD, "spec.nodeName") == "rillet-e2e-b"
    assert field_value(POD, "status.podIP") == "198.18.0.9"


def test_cri_log_lines_join_partial_chunks(tmp_path: Path):
    log = tmp_path / "0.log"
    log.write_text("2026-01-01T00:00:00Z stdout P hel\n2026-01-01T00:00:00Z stdout F lo\n"
                   "2026-01-01T00:00:01Z stderr F world\n")
    assert list(_cri_log_lines(log, False)) == ["hello\n", "world\n"]
    assert list(_cri_log_lines(log, True))[1] == "2026-01-01T00:00:01Z world\n"


def test_image_inputs_are_the_copied_files(tmp_path: Path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text("v1")
    (tmp_path / "unrelated.txt").write_text("x")
    df = tmp_path / "Dockerfile"
    df.write_text("FROM python:3.11-slim-bookworm AS a\nCOPY --from=a /x /y\n"
                  "COPY app/ /app/\nRUN true\n")
    assert _copy_sources(df) == {"app/"}
    spec = ImageSpec("t:dev", df, tmp_path, required=True)
    before = inputs_hash(spec, "base1")
    (tmp_path / "unrelated.txt").write_text("changed")
    assert inputs_hash(spec, "base1") == before
    assert inputs_hash(spec, "base2") != before
    (tmp_path / "app" / "m.py").write_text("v2")
    assert inputs_hash(spec, "base1") != before


def test_an_image_built_from_another_is_rebuilt_when_that_one_changes(tmp_path: Path):
    (tmp_path / "spark").mkdir()
    (tmp_path / "spark" / "job.py").write_text("v1")
    parent_df = tmp_path / "spark" / "Dockerfile"
    parent_df.write_text("FROM python:3.11-slim-bookworm\nCOPY spark/job.py /job.py\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("binary")
    child_df = tmp_path / "Dockerfile.child"
    child_df.write_text("ARG SPARK_IMAGE=p:dev\nFROM ${SPARK_IMAGE}\nCOPY tool /usr/bin/tool\n")
    parent = ImageSpec("p:dev", parent_df, tmp_path, required=False)
    child = ImageSpec("c:dev", child_df, tmp_path / "bin", required=False, parent="p:dev")
    specs = [parent, child]
    assert lineage_base(specs, parent, "base") == "base"
    before = inputs_hash(child, lineage_base(specs, child, "base"))
    (tmp_path / "spark" / "job.py").write_text("v2")
    assert inputs_hash(child, lineage_base(specs, child, "base")) != before


def test_the_spark_operator_image_follows_the_spark_image():
    specs = discover(Path(__file__).resolve().parents[1])
    tags = [s.tag for s in specs]
    op = specs[tags.index("rillet/spark-operator:dev")]
    assert op.parent == "rillet/spark:dev" and tags.index(op.parent) < tags.index(op.tag)
    assert op.context.name == (op.dockerfile.parent / "VERSION").read_text().strip()


def test_probe_thresholds():
    p = ProbeState({"periodSeconds": 1, "failureThreshold": 2, "successThreshold": 1})
    assert p.record(False, 0.0) is None  # one failure is not yet a verdict
    assert p.record(False, 1.0) is False
    assert p.record(True, 2.0) is True
    assert not p.due(2.5) and p.due(3.0)


def test_long_steps_report_progress_and_keep_the_full_log(tmp_path: Path, capsys):
    """Builds and debootstrap show how far they are while they run; the whole output is kept."""
    script = "echo 'STEP 1/3: FROM x'; echo noise; echo 'STEP 2/3: RUN pip install y'"
    code = run_reporting(["sh", "-c", script], tmp_path / "b.log",
                         lambda line: _build_step("rillet/x:dev", line))
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["images: rillet/x:dev STEP 1/3: FROM x",
                   "images: rillet/x:dev STEP 2/3: RUN pip install y"]
    assert "noise" in (tmp_path / "b.log").read_text()

    progress = DebootstrapProgress()
    lines = [f"I: Retrieving pkg{i} 1.0" for i in range(50)] + ["I: Validating pkg0", "W: x"]
    shown = [s for s in map(progress.line, lines) if s]
    assert shown == ["images: debootstrap: Retrieving pkg0 1.0",
                     "images: debootstrap: Retrieving ... 25 packages",
                     "images: debootstrap: Retrieving ... 50 packages",
                     "images: debootstrap: Validating pkg0"]


def test_a_step_past_its_timeout_is_killed(tmp_path: Path):
    with pytest.raises(subprocess.TimeoutExpired):
        run_reporting(["sleep", "30"], tmp_path / "s.log", lambda _l: None, timeout=0.5)


def test_kubectl_is_built_only_when_none_is_on_path(tmp_path: Path, monkeypatch):
    """A fresh machine may have no kubectl: the harness builds one and puts it first on PATH,
    which the tests, submit-k8s and the demo inherit; one on PATH is used as it is."""
    from localk8s import cluster
    built: list[str] = []

    def build(layout, what="k8s"):
        built.append(what)
        return tmp_path / "bin"
    monkeypatch.setattr(cluster, "build_binaries", build)
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.setattr(cluster.shutil, "which", lambda name: None)
    assert cluster.ensure_kubectl(None) == str(tmp_path / "bin" / "kubectl")
    assert built == ["kubectl"]
    assert cluster.os.environ["PATH"] == f"{tmp_path / 'bin'}:/usr/bin"
    monkeypatch.setattr(cluster.shutil, "which", lambda name: "/opt/k/kubectl")
    assert cluster.ensure_kubectl(None) == "/opt/k/kubectl" and built == ["kubectl"]


def test_security_contexts_become_podman_flags_container_over_pod() -> None:
    pod = {"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 2000}
    container = {"runAsUser": 1001, "readOnlyRootFilesystem": True,
                 "allowPrivilegeEscalation": False,
                 "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}
    assert security_args(pod, container) == [
        "--user", "1001", "--group-add", "2000", "--read-only", "--read-only-tmpfs=false",
        "--cap-drop", "all",
        "--cap-add", "NET_BIND_SERVICE", "--security-opt", "no-new-privileges"]
    assert security_args({}, {}) == []
    assert security_args({"runAsUser": 5, "runAsGroup": 6}, {}) == ["--user", "5:6"]


def test_fs_group_makes_a_claims_files_group_writable(tmp_path) -> None:
    claim = tmp_path / "claim"
    (claim / "sub").mkdir(parents=True)
    (claim / "sub" / "f").write_text("x")
    os.chmod(claim / "sub" / "f", 0o600)
    pod = {"metadata": {"namespace": "ns"},
           "spec": {"securityContext": {"fsGroup": 4321},
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]}}
    VolumeWriter(None, pod, tmp_path / "vols", lambda ns, name: claim).prepare()
    for p in (claim, claim / "sub", claim / "sub" / "f"):
        assert os.stat(p).st_gid == 4321
    assert os.stat(claim / "sub").st_mode & 0o2070 == 0o2070
    assert os.stat(claim / "sub" / "f").st_mode & 0o777 == 0o660


def test_run_as_non_root_is_checked_against_the_images_user_as_the_kubelet_does() -> None:
    strict = {"runAsNonRoot": True}
    assert non_root_refusal(strict, {}, "1001:1001") is None
    assert "will run as root" in non_root_refusal(strict, {}, "")
    assert "will run as root" in non_root_refusal(strict, {}, "root")
    assert "non-numeric user (spark)" in non_root_refusal(strict, {}, "spark")
    assert non_root_refusal(strict, {"runAsUser": 185}, "") is None
    assert "breaks non-root" in non_root_refusal({}, {"runAsNonRoot": True, "runAsUser": 0}, "")
    assert non_root_refusal({}, {}, "") is None


def test_kind_archives_carry_the_names_pod_specs_use(tmp_path):
    """containerd reads `rillet/broker:dev` as docker.io/rillet/broker:dev; the archive kind
    loads is renamed to that (and to every alias), its layers untouched."""
    assert containerd_name("rillet/broker:dev") == "docker.io/rillet/broker:dev"
    assert containerd_name("rillet-spark:dev") == "docker.io/library/rillet-spark:dev"
    assert containerd_name("localhost/x/y:1") == "localhost/x/y:1"
    assert containerd_name("registry.k8s.io/pause:3.10.1") == "registry.k8s.io/pause:3.10.1"
    src, dst = tmp_path / "in.tar", tmp_path / "out.tar"
    files = {"manifest.json": json.dumps([{"Config": "c.json", "RepoTags": ["localhost/p:tmp"],
                                           "Layers": ["l/layer.tar"]}]),
             "repositories": json.dumps({"localhost/p": {"tmp": "abc"}}),
             "l/layer.tar": "layer bytes"}
    with tarfile.open(src, "w") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    names = ["docker.io/rillet/spark:dev", "docker.io/library/rillet-spark:dev"]
    rename(src, dst, names)
    with tarfile.open(dst) as tar:
        out = {m.name: tar.extractfile(m).read().decode() for m in tar}
    assert json.loads(out["manifest.json"])[0]["RepoTags"] == names
    assert json.loads(out["repositories"]) == {"docker.io/rillet/spark": {"dev": "abc"},
                                               "docker.io/library/rillet-spark": {"dev": "abc"}}
    assert out["l/layer.tar"] == "layer bytes"
