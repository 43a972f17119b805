"""The project's own images build from their unchanged Dockerfiles (local cluster only: kind
builds them in e2e/kind.sh with docker)."""
from __future__ import annotations

import pytest

from localk8s import host, images


def test_project_images_built_from_their_dockerfiles(k8s):
    if not k8s.local:
        pytest.skip("images are built by e2e/kind.sh on kind")
    specs = images.discover(k8s.layout.repo)
    tags = {s.tag for s in specs}
    assert "rillet/broker:dev" in tags and "rillet/e2e-echo:dev" in tags
    assert k8s.image_errors == {}, k8s.image_errors
    for spec in specs:
        out = host.podman(k8s.layout, "image", "inspect", "--format",
                          '{{index .Labels "%s"}}' % images.INPUTS_LABEL, spec.tag)
        assert out.stdout.strip(), f"{spec.tag} has no inputs label"


def test_broker_image_entrypoint_is_rillet_serve(k8s):
    if not k8s.local:
        pytest.skip("images are built by e2e/kind.sh on kind")
    out = host.podman(k8s.layout, "image", "inspect", "--format", "{{json .Config.Entrypoint}}",
                      "rillet/broker:dev")
    assert out.stdout.strip() == '["rillet","serve"]'
    # The package is installed in the image: its CLI answers --help without a broker running.
    run = host.podman(k8s.layout, "run", "--rm", "--network", "none", "--entrypoint", "rillet",
                      "rillet/broker:dev", "--help", check=False, timeout=120)
    assert run.returncode == 0, run.stderr
