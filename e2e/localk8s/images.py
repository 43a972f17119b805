"""The project's images, built by podman from their own Dockerfiles (for kind: kind_images.py).

The Dockerfiles stay standard (`FROM python:3.11-slim-bookworm`). Nothing is pulled here, so that
base name is satisfied by a local image imported from a debootstrap'd Debian bookworm with
Python 3.11 (Debian's python3 plus pip; "externally managed" marker removed and site-packages
aliased, like the official image) plus this machine's extra CA certificates. Elsewhere (Docker)
the same Dockerfiles build on the real base image.

Tags: broker_image/ -> rillet/broker:dev, operator/ -> rillet/operator:dev, spark/ ->
rillet/spark:dev (also rillet-spark:dev), spark/operator/ -> rillet/spark-operator:dev (FROM
rillet/spark:dev; its context is the Go-built binary's cache folder), e2e/test-images/<name>/ ->
rillet/e2e-<name>:dev.

Each image is keyed by the hash of its inputs (the Dockerfile and what its COPY/ADD lines name),
so an unchanged image is not rebuilt.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import host
from .host import Layout, podman

BASE_IMAGE = "docker.io/library/python:3.11-slim-bookworm"
BASE_PACKAGES = "python3,python3-pip,python3-venv,ca-certificates,procps,iproute2"
INPUTS_LABEL = "rillet.inputs"
HOST_CA_DIR = "/usr/local/share/ca-certificates"
ALIASES = {"rillet/spark:dev": ("rillet-spark:dev",)}  # the name spark/Dockerfile documents
SKIP_DIRS = {"__pycache__", ".git", ".venv", ".pytest_cache", ".mypy_cache", "node_modules"}


@dataclass(frozen=True)
class ImageSpec:
    """One image: its Dockerfile, build context and tag."""

    tag: str
    dockerfile: Path
    context: Path
    required: bool  # test images must build; the project's images are reported when they fail
    aliases: tuple[str, ...] = ()  # extra tags for the same image
    # The project image this one is built FROM (its Dockerfile's `ARG SPARK_IMAGE`): built first,
    # and its inputs are part of this image's hash.
    parent: str | None = None
    prepare: tuple[str, ...] = ()  # a command (repo-relative) that makes the context first


SPARK_OPERATOR_TAG = "rillet/spark-operator:dev"


def spark_operator_spec(repo: Path) -> ImageSpec:
    """The Spark operator's image: spark/operator/Dockerfile over the folder e2e/build-k8s
    builds its Go binary into (~/.cache/rillet/spark-operator/<version in VERSION>)."""
    version = (repo / "spark" / "operator" / "VERSION").read_text().strip()
    cache = Path(os.environ.get("RILLET_CACHE", Path.home() / ".cache" / "rillet"))
    return ImageSpec(SPARK_OPERATOR_TAG, repo / "spark" / "operator" / "Dockerfile",
                     cache / "spark-operator" / version, required=False,
                     parent="rillet/spark:dev", prepare=("e2e/build-k8s", "spark-operator"))


def discover(repo: Path) -> list[ImageSpec]:
    """The project's Dockerfiles (context = repo root, like `docker build -f X/Dockerfile .`)
    plus every e2e/test-images/<name>/Dockerfile (context = its folder)."""
    specs = []
    for folder, tag in (("broker_image", "rillet/broker:dev"), ("operator", "rillet/operator:dev"),
                        ("spark", "rillet/spark:dev")):
        df = repo / folder / "Dockerfile"
        if df.exists():
            specs.append(ImageSpec(tag, df, repo, required=False, aliases=ALIASES.get(tag, ())))
    if (repo / "spark" / "operator" / "Dockerfile").exists():
        specs.append(spark_operator_spec(repo))
    for df in sorted((repo / "e2e" / "test-images").glob("*/Dockerfile")):
        specs.append(ImageSpec(f"rillet/e2e-{df.parent.name}:dev", df, df.parent, required=True))
    return specs


def inputs_hash(spec: ImageSpec, base_id: str = "") -> str:
    """Hash of the base image id, the Dockerfile and every file its COPY/ADD lines take."""
    h = hashlib.sha256(base_id.encode() + spec.dockerfile.read_bytes())
    for src in sorted(_copy_sources(spec.dockerfile)):
        for path in sorted(_files(spec.context, src)):
            h.update(str(path.relative_to(spec.context)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def lineage_base(specs: list[ImageSpec], spec: ImageSpec, base_id: str) -> str:
    """What spec's hash starts from: the base image's id, or for an image built FROM another
    project image, that image's inputs hash (so a changed Spark image rebuilds the operator's)."""
    if spec.parent is None:
        return base_id
    parent = next(s for s in specs if s.tag == spec.parent)
    return inputs_hash(parent, lineage_base(specs, parent, base_id))


def prepare(layout: Layout, spec: ImageSpec) -> None:
    """Makes spec's build context when something outside the repository builds it."""
    if spec.prepare:
        subprocess.run([str(layout.repo / spec.prepare[0]), *spec.prepare[1:]], check=True,
                       stdout=subprocess.DEVNULL, timeout=3600)


def _copy_sources(dockerfile: Path) -> set[str]:
    """Source paths of COPY/ADD lines (not `--from=` stage copies), continuation lines joined."""
    text = dockerfile.read_text().replace("\\\n", " ")
    out: set[str] = set()
    for line in text.splitlines():
        words = line.strip().split(None, 1)
        if len(words) < 2 or words[0].upper() not in ("COPY", "ADD"):
            continue
        rest = words[1].strip()
        if rest.startswith("["):
            import json
            args = json.loads(rest)
        else:
            args = shlex.split(rest)
        if any(a.startswith("--from") for a in args):
            continue
        args = [a for a in args if not a.startswith("--")]
        out.update(args[:-1])
    return out


def _files(context: Path, pattern: str):
    for match in glob.glob(str(context / pattern)):
        p = Path(match)
        if p.is_file():
            yield p
        elif p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
                for f in sorted(files):
                    if not f.endswith((".pyc", ".pyo")):
                        yield Path(root) / f


def _label(layout: Layout, image: str) -> str | None:
    proc = podman(layout, "image", "inspect", "--format",
                  "{{index .Labels \"%s\"}}" % INPUTS_LABEL, image, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


# ---- the base image ----------------------------------------------------------------------------

def _base_recipe() -> str:
    return f"bookworm minbase {BASE_PACKAGES} v2"


def ensure_base(layout: Layout) -> None:
    """Makes python:3.11-slim-bookworm: the debootstrap'd rootfs (imported once per recipe),
    plus this machine's extra CA certificates (/usr/local/share/ca-certificates, e.g. a TLS
    egress proxy's), so pip, apt and Java's trust store inside builds all accept them; nothing is
    mounted into builds. Rebuilt when the recipe or those certificates change."""
    recipe = hashlib.sha256(_base_recipe().encode()).hexdigest()[:12]
    clean = f"localhost/rillet-e2e-base:bookworm-{recipe}"
    cas = sorted(Path(HOST_CA_DIR).glob("*.crt")) if Path(HOST_CA_DIR).is_dir() else []
    digest = hashlib.sha256(recipe.encode())
    for ca in cas:
        digest.update(ca.name.encode() + ca.read_bytes())
    want = digest.hexdigest()[:16]
    if _label(layout, BASE_IMAGE) == want:
        return
    if podman(layout, "image", "exists", clean, check=False).returncode != 0:
        tarball = layout.cache / "images" / f"bookworm-py311-{recipe}.tar"
        if not tarball.exists():
            _debootstrap(tarball)
        podman(layout, "import",
               "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "--change", "ENV LANG=C.UTF-8",
               "--change", 'CMD ["python3"]', str(tarball), clean, timeout=600)
    with tempfile.TemporaryDirectory() as ctx:
        lines = [f"FROM {clean}"]
        if cas:
            for ca in cas:
                shutil.copy(ca, Path(ctx) / ca.name)
            lines += ["COPY *.crt /usr/local/share/ca-certificates/",
                      "RUN update-ca-certificates >/dev/null"]
        (Path(ctx) / "Containerfile").write_text("\n".join(lines) + "\n")
        podman(layout, "build", "--pull=never", "--network", "none", "--label",
               f"{INPUTS_LABEL}={want}", "-t", BASE_IMAGE, ctx, timeout=600)


def _debootstrap(tarball: Path) -> None:
    t0 = time.monotonic()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    root = tarball.parent / "rootfs.tmp"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    print("images: debootstrap bookworm (about a minute)", file=sys.stderr, flush=True)
    log = tarball.parent / "debootstrap.log"
    code = run_reporting(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}",
                          "bookworm", str(root), "http://deb.debian.org/debian"],
                         log, DebootstrapProgress().line, timeout=1200)
    if code != 0:
        raise RuntimeError(f"debootstrap failed ({code}); log {log}")
    # Like the official image: pip may install into the system Python, `python`/`pip` exist.
    for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for link, target in (("python", "python3"), ("pip", "pip3")):
        p = root / "usr" / "bin" / link
        if not p.exists():
            p.symlink_to(target)
    # The official image installs packages into .../site-packages (Dockerfiles name that path,
    # e.g. SPARK_HOME); Debian's pip uses dist-packages: make both names one folder.
    local = root / "usr" / "local" / "lib" / "python3.11"
    (local / "dist-packages").mkdir(parents=True, exist_ok=True)
    if not (local / "site-packages").exists():
        (local / "site-packages").symlink_to("dist-packages")
    subprocess.run(["sh", "-c", "rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* "
                    "usr/share/doc/* usr/share/man/*"], cwd=root, check=True)
    tmp = tarball.with_suffix(".part")
    subprocess.run(["tar", "-C", str(root), "-cf", str(tmp), "."], check=True, timeout=600)
    tmp.replace(tarball)
    subprocess.run(["rm", "-rf", str(root)], check=True)
    print(f"images: base rootfs in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)


# ---- progress -------------------------------------------------------------------------------

def run_reporting(argv: list[str], log: Path, report, env: dict | None = None,
                  timeout: float = 1800) -> int:
    """Runs argv with its output going to `log`; each line also goes to `report`, which
    returns what to print (or None), so a long step shows how far it is instead of minutes of
    silence. Killed after `timeout` seconds, as subprocess.run's timeout would."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        watchdog = threading.Timer(timeout, kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                out.write(line)
                shown = report(line.rstrip("\n"))
                if shown:
                    print(shown, file=sys.stderr, flush=True)
        finally:
            watchdog.cancel()
        code = proc.wait()
    if killed.is_set():
        raise subprocess.TimeoutExpired(argv, timeout)
    return code


def _build_step(tag: str, line: str) -> str | None:
    """podman's `STEP 3/12: RUN ...` lines, shortened."""
    if line.startswith("STEP "):
        return f"images: {tag} {line[:100]}"
    return None


class DebootstrapProgress:
    """debootstrap prints one `I: <Phase> <package>` line per package: one line per phase, and
    a count every 25 packages of the long ones."""

    def __init__(self) -> None:
        self.phase, self.count = "", 0

    def line(self, line: str) -> str | None:
        if not line.startswith("I: "):
            return None
        phase = line[3:].split(" ", 1)[0]
        if phase != self.phase:
            self.phase, self.count = phase, 1
            return f"images: debootstrap: {line[3:80]}"
        self.count += 1
        if self.count % 25 == 0:
            return f"images: debootstrap: {phase} ... {self.count} packages"
        return None


# ---- building ---------------------------------------------------------------------------------

def base_id(layout: Layout) -> str:
    """The id of the local python:3.11-slim-bookworm ('' when missing): part of every hash."""
    return podman(layout, "image", "inspect", "--format", "{{.Id}}", BASE_IMAGE,
                  check=False).stdout.strip()


def podman_build(layout: Layout, spec: ImageSpec, tag: str, digest: str,
                 log_prefix: str = "", build_args: tuple[str, ...] = ()) -> None:
    """`podman build` of spec's Dockerfile as `tag` (labelled with its inputs' digest), with
    progress on stderr; raises with the log's tail when it fails."""
    t0 = time.monotonic()
    log = layout.cache / "images" / f"{log_prefix}{spec.tag.replace('/', '_').replace(':', '_')}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = ["build", "--pull=never", "--network", "host", "--layers",
            "--label", f"{INPUTS_LABEL}={digest}", *(f"--build-arg={a}" for a in build_args),
            "-f", str(spec.dockerfile), "-t", tag, str(spec.context)]
    print(f"images: building {spec.tag} from {spec.dockerfile.relative_to(layout.repo)}",
          file=sys.stderr, flush=True)
    code = run_reporting(["podman", *argv], log, lambda line: _build_step(spec.tag, line),
                         env=host.podman_env(layout), timeout=1800)
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"podman build of {spec.tag} from {spec.dockerfile} failed; "
                           f"log {log}:\n{tail}")
    print(f"images: built {spec.tag} in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
