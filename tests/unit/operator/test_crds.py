"""crds/ is the one source: the chart ships identical copies; the CRDs say what the issue asks."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def test_chart_crds_are_identical_to_crds_dir():
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (ROOT / "helm/rillet/crds").glob("*.yaml")}
    assert source and chart == source


def _crd(name):
    return yaml.safe_load((ROOT / "crds" / name).read_text())


def test_cluster_and_topic_crds():
    for file, plural, short, columns in (
            ("rillet.io_clusters.yaml", "clusters", "rlc",
             {"Desired", "Ready-Brokers", "Bootstrap", "Ready", "Age"}),
            ("rillet.io_topics.yaml", "topics", "rlt",
             {"Cluster", "Partitions", "Replicas", "Ready", "Age"})):
        crd = _crd(file)
        spec = crd["spec"]
        assert spec["group"] == "rillet.io" and spec["scope"] == "Namespaced"
        assert spec["names"]["plural"] == plural and spec["names"]["shortNames"] == [short]
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
        assert columns <= {c["name"] for c in version["additionalPrinterColumns"]}
        props = version["schema"]["openAPIV3Schema"]["properties"]
        assert "conditions" in props["status"]["properties"]
    cluster = _crd("rillet.io_clusters.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cspec = cluster["properties"]["spec"]["properties"]
    assert cspec["replicas"]["minimum"] == 1
    assert cspec["storage"]["properties"]["type"]["enum"] == ["ephemeral", "persistent-claim"]
    topic = _crd("rillet.io_topics.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert topic["properties"]["spec"]["properties"]["partitions"]["minimum"] == 1


def test_user_crd_and_cluster_security_fields():
    crd = _crd("rillet.io_users.yaml")["spec"]
    assert crd["names"]["kind"] == "User" and crd["names"]["shortNames"] == ["rlu"]
    (version,) = crd["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["required"]) == {"cluster", "authentication"}
    assert spec["properties"]["authentication"]["properties"]["type"]["enum"] == \
        ["scram-sha-512", "tls"]
    acl = spec["properties"]["authorization"]["properties"]["acls"]["items"]["properties"]
    assert acl["resource"]["properties"]["patternType"]["enum"] == ["literal", "prefix"]
    cluster = _crd("rillet.io_clusters.yaml")["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]["properties"]["spec"]["properties"]
    listener = cluster["listeners"]["items"]["properties"]
    assert listener["authentication"]["properties"]["type"]["enum"] == \
        ["none", "scram-sha-512", "tls"]
    assert cluster["authorization"]["properties"]["type"]["enum"] == ["simple"]


def _columns(file: str) -> dict[str, dict]:
    (version,) = _crd(file)["spec"]["versions"]
    return {c["name"]: c for c in version["additionalPrinterColumns"]}


def test_columns_show_observed_state_and_the_reason_without_wide():
    """Issue 32: PARTITIONS printed the spec (3 after a refused decrease of a 6-partition
    topic) and REASON needed -o wide."""
    topic = _columns("rillet.io_topics.yaml")
    assert topic["Partitions"]["jsonPath"] == ".status.partitions"
    assert topic["Replicas"]["jsonPath"] == ".status.replicas"
    cluster = _columns("rillet.io_clusters.yaml")
    assert cluster["Brokers"]["jsonPath"] == ".status.replicas"
    assert cluster["Ready-Brokers"]["jsonPath"] == ".status.readyBrokers"
    for file in ("rillet.io_clusters.yaml", "rillet.io_topics.yaml", "rillet.io_users.yaml"):
        reason = _columns(file)["Reason"]
        assert reason.get("priority", 0) == 0, file
        assert reason["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    # Every column reads spec, status or creation time: nothing else exists to print.
    for file in ("rillet.io_clusters.yaml", "rillet.io_topics.yaml"):
        for c in _columns(file).values():
            assert c["jsonPath"].startswith((".spec.", ".status.", ".metadata.creation")), c
