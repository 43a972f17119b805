"""`e2e/kind.sh up`'s project images: one docker-archive per image, for `kind load image-archive`.

Built as `e2e/images build` builds them (podman, the same Dockerfiles, the same local base image
and input hashes), but podman's store only ever sees a private name
(localhost/rillet-kind-<pid>-<n>:tmp, removed again): the shared `localhost/rillet/*:dev` tags
belong to the local stand-in, whose running pods and CI build must not see another worktree's
image. The archive then names the image as a pod spec does (`rillet/broker:dev`, which
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


def ensure_archive(layout: Layout, spec: images.ImageSpec, base: str, seq: int) -> Path:
    """The archive of spec at its current inputs, built when missing."""
    digest = images.inputs_hash(spec, base)
    out = archive_path(layout, spec, digest)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    private = f"localhost/rillet-kind-{os.getpid()}-{seq}:tmp"
    tmp = out.with_suffix(".tmp")
    try:
        images.podman_build(layout, spec, private, digest, log_prefix="kind-")
        podman(layout, "save", "--quiet", "--format", "docker-archive", "-o", str(tmp), private,
               timeout=900)
    finally:
        podman(layout, "rmi", private, check=False)
    rename(tmp, out, [containerd_name(t) for t in (spec.tag, *spec.aliases)])
    tmp.unlink()
    for old in out.parent.glob(f"{out.name.rsplit('-', 1)[0]}-*.tar"):
        if old != out:  # the same image at older inputs: no longer loaded anywhere
            old.unlink()
    return out


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
    for seq, spec in enumerate(images.discover(layout.repo)):
        print(f"{spec.tag}\t{ensure_archive(layout, spec, base, seq)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
