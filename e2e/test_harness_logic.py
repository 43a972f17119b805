"""Pure pieces of the e2e harness (no cluster needed): the Dockerfile inputs the image cache
hashes, the progress and timeout of long build steps, and the names kind's image archives carry."""
from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from localk8s.images import (DebootstrapProgress, ImageSpec, _build_step, _copy_sources,
                             discover, inputs_hash, lineage_base, run_reporting)
from localk8s.kind_images import containerd_name, rename


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
