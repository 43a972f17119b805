"""`e2e/kind.sh up`'s project images: one docker-archive per image, for `kind load image-archive`.

Built by podman from the Dockerfiles (images.py: the local base image, input hashes), but
podman's store only ever sees a private name (localhost/rillet-kind-<pid>-<n>:tmp, removed
again): two checkouts building at once never see each other's image under a shared tag. The
archive then names the image as a pod spec does (`rillet/broker:dev`, which
containerd reads as docker.io/rillet/broker:dev), so `imagePullPolicy: IfNotPresent` finds it.

Archives are cached as ~/.cache/rillet/kind/project-images/<tag>-<inputs hash>.tar: an archive
is rebuilt only when its inputs change. Prints `<tag>\\t<archive>` per image on stdout.
"""
from __future__ import annotations

import io
import json
import os
import sys
import tarfile
from pathlib import Path

from . import host, images
from .host import Layout, podman


def containerd_name(tag: str) -> str:
    """The name containerd gives a short image reference (docker's normalisation)."""
    first = tag.split("/", 1)[0]
    if "/" in tag and ("." in first or ":" in first or first == "localhost"):
        return tag
    return f"docker.io/{tag}" if "/" in tag else f"docker.io/library/{tag}"


def archive_path(layout: Layout, spec: images.ImageSpec, digest: str) -> Path:
    safe = spec.tag.replace("/", "_").replace(":", "_")
    return layout.cache / "kind" / "project-images" / f"{safe}-{digest[:16]}.tar"


def ensure_archive(layout: Layout, spec: images.ImageSpec, base: str, seq: int,
                   parent_archive: Path | None = None) -> Path:
    """The archive of spec at its current inputs (its hash starting from `base`, see
    images.lineage_base), built when missing; an image built FROM another project image
    (spec.parent) builds on that image's archive, loaded under a private name for the build."""
    images.prepare(layout, spec)
    digest = images.inputs_hash(spec, base)
    out = archive_path(layout, spec, digest)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    private = f"localhost/rillet-kind-{os.getpid()}-{seq}:tmp"
    parent = f"localhost/rillet-kind-{os.getpid()}-{seq}-parent:tmp"
    tmp = out.with_suffix(".tmp")
    try:
        build_args: tuple[str, ...] = ()
        if spec.parent is not None:
            assert parent_archive is not None, spec.parent
            load_private(layout, parent_archive, parent)
            build_args = (f"SPARK_IMAGE={parent}",)
        images.podman_build(layout, spec, private, digest, log_prefix="kind-", build_args=build_args)
        podman(layout, "save", "--quiet", "--format", "docker-archive", "-o", str(tmp), private,
               timeout=900)
    finally:
        podman(layout, "rmi", private, check=False)
        if spec.parent is not None:
            podman(layout, "rmi", parent, check=False)
    rename(tmp, out, [containerd_name(t) for t in (spec.tag, *spec.aliases)])
    tmp.unlink()
    for old in out.parent.glob(f"{out.name.rsplit('-', 1)[0]}-*.tar"):
        if old != out:  # the same image at older inputs: no longer loaded anywhere
            old.unlink()
    return out


def load_private(layout: Layout, archive: Path, private: str) -> None:
    """Loads a docker-archive of ours into podman under `private` only: the names the archive
    carries (docker.io/rillet/...) are untagged again at once."""
    loaded = podman(layout, "load", "--quiet", "-i", str(archive), timeout=900).stdout
    names = [name.strip() for line in loaded.splitlines() if ": " in line
             for name in line.split(": ", 1)[1].split(",")]  # "Loaded image(s): a,b" too
    podman(layout, "tag", names[0], private)
    for name in names:
        podman(layout, "untag", private, name, check=False)


def rename(src: Path, dst: Path, names: list[str]) -> None:
    """Copies a docker-archive with `names` as its only tags (manifest.json RepoTags and the
    legacy `repositories` file), layers unchanged."""
    with tarfile.open(src) as tin, tarfile.open(f"{dst}.part", "w") as tout:
        for member in tin:
            data = tin.extractfile(member) if member.isfile() else None
            if member.name == "manifest.json":
                manifest = json.load(data)
                for entry in manifest:
                    entry["RepoTags"] = names
                data, member.size = _bytes(json.dumps(manifest)), 0
            elif member.name == "repositories":
                image_id = next(iter(next(iter(json.load(data).values())).values()))
                repos: dict[str, dict[str, str]] = {}
                for name in names:
                    repo, tag = name.rsplit(":", 1)
                    repos.setdefault(repo, {})[tag] = image_id
                data, member.size = _bytes(json.dumps(repos)), 0
            if isinstance(data, io.BytesIO):
                member.size = len(data.getvalue())
            tout.addfile(member, data)
    os.replace(f"{dst}.part", dst)


def _bytes(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode())


def main() -> int:
    layout = Layout.default()
    host.write_containers_conf(layout)
    images.ensure_base(layout)
    base = images.base_id(layout)
    specs = images.discover(layout.repo)
    archives: dict[str, Path] = {}
    for seq, spec in enumerate(specs):
        archives[spec.tag] = ensure_archive(layout, spec, images.lineage_base(specs, spec, base),
                                            seq, archives.get(spec.parent or ""))
        print(f"{spec.tag}\t{archives[spec.tag]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
