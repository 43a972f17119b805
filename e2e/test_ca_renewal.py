"""e2e: the cluster CA renewed, then replaced, under acks=all idempotent streams (issue 28).

A secured Cluster (SCRAM over TLS), a stream running. `rillet.io/force-renew` on
`<cluster>-cluster-ca` renews the CA (same key: both certificates trusted, leaves re-signed, one
roll; the old one dropped, a roll); `rillet.io/force-replace` makes a new key (trusted beside the
old, a roll; leaves signed by it, a roll; the old dropped, a roll). After each, a fresh client
that trusts only what `<cluster>-cluster-ca-cert` publishes connects. The clients CA is
replaced in the same rolls: the tls User's certificate is re-signed by the new one and connects
over mTLS afterwards.

A client keeps the truststore it started with: a renewal needs nothing of it (the same key
verifies either certificate), a replacement needs it to load the new bundle while the phase is
TrustNew, before anything is signed with the new key (as with Strimzi). So the first stream
(old CA only) runs through the renewal and into TrustNew, where a second stream starts from
the published bundle (both CAs) and the first stops; the second runs through the rest of the
replacement. Each stream: 0 failed, 0 missing, 0 duplicates.

The operator's pod is deleted once the replacement is in TrustNew (its roll under way): the
Deployment's new pod resumes from the phase the CA Secret records, so the steps are each taken
once, the new pod's log shows it took the later ones, and the Cluster status's CA generation
and phase never go backwards.
"""
from __future__ import annotations

import base64
import time
import uuid
from collections import Counter
from typing import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from localk8s.kube import Kube
from localk8s.testing import restricted_namespace
from test_operator import (delete_namespace, events, get_cr, job_result,  # noqa: F401
                           operator, run_job, start_job)
from test_operator_peering import _operator_pods, _paused
from test_security import _apply, _wait_ready

pytestmark = pytest.mark.timeout(1200)

CLUSTER = "carenew"
PORT, MTLS_PORT = 9094, 9095
SCRAM, MTLS = f"{CLUSTER}-bootstrap:{PORT}", f"{CLUSTER}-bootstrap:{MTLS_PORT}"
CA_SECRET, PUBLISHED = f"{CLUSTER}-cluster-ca", f"{CLUSTER}-cluster-ca-cert"
CLIENTS_CA_SECRET = f"{CLUSTER}-clients-ca"
CA_MOUNT = "/etc/cluster-ca"
RATE, STREAM_MAX_S = "30", "900"
RESULTS: dict[str, object] = {}
# A CA's rollover phases in the order they come (Idle: done, or not started).
PHASE_ORDER = {"TrustNew": 1, "SignNew": 2, "DropOld": 3, "Idle": 4}


@pytest.fixture(scope="module")
def renewing(k8s, operator) -> Iterator[str]:  # noqa: F811
    kube = k8s.kube
    ns = f"e2e-ca-{uuid.uuid4().hex[:5]}"
    kube.create(restricted_namespace(ns))
    try:
        _apply(kube, ns, "clusters", "Cluster", CLUSTER, {
            # Claims: a restarted broker keeps its log and catches up, so five rolls of three
            # brokers fit the time this test may take.
            "replicas": 3, "config": {"min.insync.replicas": 2},
            "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True},
            "listeners": [{"name": "scram", "port": PORT, "tls": True,
                           "authentication": {"type": "scram-sha-512"}},
                          {"name": "mtls", "port": MTLS_PORT, "tls": True,
                           "authentication": {"type": "tls"}}]})
        _wait_ready(k8s, ns, f"cluster.rillet.io/{CLUSTER}", 420)
        for topic in ("stream-a", "stream-b", "mtls"):
            _apply(kube, ns, "topics", "Topic", topic, {"cluster": CLUSTER, "partitions": 3,
                                                        "replicas": 3})
        _apply(kube, ns, "users", "User", "alice", {
            "cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}})
        _apply(kube, ns, "users", "User", "carol", {
            "cluster": CLUSTER, "authentication": {"type": "tls"}})
        for resource in ("topic.rillet.io/stream-a", "topic.rillet.io/stream-b",
                         "topic.rillet.io/mtls", "user.rillet.io/alice", "user.rillet.io/carol"):
            _wait_ready(k8s, ns, resource)
        yield ns
    finally:
        delete_namespace(kube, ns)


def _certs(kube: Kube, ns: str, secret: str, key: str = "ca.crt") -> list[x509.Certificate]:
    data = (kube.get("Secret", secret, ns).get("data") or {})[key]
    return x509.load_pem_x509_certificates(base64.b64decode(data))


def _published(kube: Kube, ns: str) -> list[x509.Certificate]:
    return _certs(kube, ns, PUBLISHED)


def _mtls_job() -> dict:
    """carol over mTLS: her certificate and trust from her User Secret."""
    mount = "/etc/user"
    return {"env": [{"name": "KAFKA_SECURITY_PROTOCOL", "value": "SSL"},
                    {"name": "KAFKA_SSL_CAFILE", "value": f"{mount}/ca.crt"},
                    {"name": "KAFKA_SSL_CERTFILE", "value": f"{mount}/user.crt"},
                    {"name": "KAFKA_SSL_KEYFILE", "value": f"{mount}/user.key"},
                    {"name": "KAFKA_GROUP_PREFIX", "value": "carol-"}],
            "secrets": {"carol": mount}}


def _spki(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)


def _scram_job(ca_secret: str = PUBLISHED) -> dict:
    """alice over SASL_SSL, trusting exactly what `ca_secret`'s ca.crt holds."""
    return {"env": [{"name": "KAFKA_SECURITY_PROTOCOL", "value": "SASL_SSL"},
                    {"name": "KAFKA_SASL_USERNAME", "value": "alice"},
                    {"name": "KAFKA_SASL_PASSWORD", "valueFrom": {
                        "secretKeyRef": {"name": "alice", "key": "password"}}},
                    {"name": "KAFKA_SSL_CAFILE", "value": f"{CA_MOUNT}/ca.crt"},
                    {"name": "KAFKA_GROUP_PREFIX", "value": "alice-"}],
            "secrets": {ca_secret: CA_MOUNT}}


def _certificates(kube: Kube, ns: str) -> dict:
    return ((get_cr(kube, ns, "clusters", CLUSTER) or {}).get("status") or {}).get(
        "certificates") or {}


def _start_stream(kube: Kube, ns: str, topic: str) -> str:
    job = start_job(kube, ns, ["stream", SCRAM, topic, RATE, STREAM_MAX_S], **_scram_job())
    kube.wait_for(f"the stream on {topic} producing", lambda: "sent" in "".join(
        kube.logs(p["metadata"]["name"], ns, "client")
        for p in kube.list("Pod", ns, labelSelector=f"job-name={job}")
        if (p.get("status") or {}).get("phase") == "Running"), 120)
    return job


def _stop_stream(kube: Kube, ns: str, topic: str, job: str) -> dict:
    _apply(kube, ns, "topics", "Topic", f"{topic}-stop", {"cluster": CLUSTER})
    out = job_result(kube, ns, job, 600)
    RESULTS[topic] = out
    assert out["stopped_by"] == "topic", out
    assert out["sent"] > 0 and out["failed"] == 0, out
    assert out["missing"] == 0 and out["duplicates"] == 0, out
    return out


def _rolled_over(kube: Kube, ns: str, generation: int, clients_generation: int = 0
                 ) -> dict | None:
    """The status once the rollovers to these generations are over and every broker, ready,
    runs the certificate status names."""
    certs = _certificates(kube, ns)
    if (certs.get("clusterCaGeneration"), certs.get("clientsCaGeneration")) != (
            generation, clients_generation) or \
            {certs.get("clusterCaPhase"), certs.get("clientsCaPhase")} != {"Idle"}:
        return None
    pods = kube.list("Pod", ns, labelSelector=f"rillet.io/cluster={CLUSTER}")
    ok = len(pods) == 3 and all(
        p["metadata"]["annotations"].get("rillet.io/broker-cert") == certs["brokerFingerprint"]
        and not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions") or ()) for p in pods)
    return certs if ok else None


def _annotate_ca(kube: Kube, ns: str, annotation: str, secret: str = CA_SECRET) -> None:
    kube.patch("Secret", secret, {"metadata": {"annotations": {annotation: "true"}}}, ns,
               merge=True)


def _rollover_steps(kube: Kube, ns: str) -> list[str]:
    """The CA rollover steps the operator took (its CaRollover Events)."""
    found = [e for e in events(kube, ns, CLUSTER) if e["reason"] == "CaRollover"
             and e["message"].startswith(f"{CA_SECRET}:")]
    return [e["message"].split(":")[1].split("(")[0].strip() for e in found]


def _progress(certs: dict) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where the cluster and clients CAs' rollovers are, as (generation, phase) pairs that
    only grow while the operator goes forward (a new generation starts at TrustNew or later)."""
    return tuple((int(certs.get(f"{ca}CaGeneration") or 0),  # type: ignore[return-value]
                  PHASE_ORDER[certs.get(f"{ca}CaPhase") or "Idle"])
                 for ca in ("cluster", "clients"))


def _went_back(samples: list[tuple]) -> list[tuple]:
    """The consecutive samples where either CA's progress decreased."""
    return [(a, b) for a, b in zip(samples, samples[1:])
            if any(y < x for x, y in zip(a, b))]


def _restart_operator(kube: Kube, op_ns: str, release: str) -> tuple[str, str]:
    """Deletes the (one) operator pod; returns (old, new) once the Deployment's new pod is
    Ready and active. The pod has no readiness probe (Ready: its process started), and Kopf's
    named peering starts it paused: its log says when it resumes operations."""
    pods = _operator_pods(kube, op_ns, release)
    assert len(pods) == 1, list(pods)
    old = next(iter(pods))
    kube.delete("Pod", old, op_ns)
    new = kube.wait_for("a new operator pod Ready", lambda: [
        p for p in _operator_pods(kube, op_ns, release) if p != old], 180, 1)
    assert len(new) == 1, new
    kube.wait_for(f"{new[0]} active", lambda: not _paused(kube, op_ns, new[0]), 120, 1)
    return old, new[0]


def test_cluster_ca_renewal_then_replacement_under_streams(k8s, renewing, operator):  # noqa: F811
    kube, ns = k8s.kube, renewing
    op_ns, release = operator
    original = _published(kube, ns)
    # What a client that never reloads its truststore holds: refused once the key is replaced.
    kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "old-ca"},
                 "data": {"ca.crt": kube.get("Secret", PUBLISHED, ns)["data"]["ca.crt"]}}, ns)
    assert len(original) == 1 and _certificates(kube, ns)["clusterCaGeneration"] == 0
    stream_a = _start_stream(kube, ns, "stream-a")

    # Renewal: same key, new validity; the old certificate trusted until the last roll.
    t0 = time.monotonic()
    _annotate_ca(kube, ns, "rillet.io/force-renew")
    kube.wait_for("both certificates published", lambda: len(_published(kube, ns)) == 2, 60)
    renewed = kube.wait_for("the renewal rolled over", lambda: _rolled_over(kube, ns, 1),
                            420, 2)
    RESULTS["renewal s"] = round(time.monotonic() - t0)
    after_renewal = _published(kube, ns)
    assert len(after_renewal) == 1 and after_renewal[0] != original[0]
    assert after_renewal[0].subject == original[0].subject
    assert _spki(after_renewal[0]) == _spki(original[0])
    assert "rillet.io/force-renew" not in (kube.get("Secret", CA_SECRET, ns)["metadata"]
                                           .get("annotations") or {})
    assert run_job(kube, ns, ["topics", SCRAM], **_scram_job())["topics"]

    # Replacement: a new key. Stream a (the old CA only) hands over to stream b (the bundle)
    # while the new CA is only trusted, not yet signing. The clients CA is replaced alongside.
    old_clients_ca = _certs(kube, ns, CLIENTS_CA_SECRET, "tls.crt")[0]
    t0 = time.monotonic()
    _annotate_ca(kube, ns, "rillet.io/force-replace")
    _annotate_ca(kube, ns, "rillet.io/force-replace", CLIENTS_CA_SECRET)
    kube.wait_for("the new CA trusted beside the old", lambda: (
        _certificates(kube, ns).get("clusterCaPhase") == "TrustNew"
        and len(_published(kube, ns)) == 2), 60)
    # The operator restarted inside TrustNew, its roll under way. After the step's Event is
    # out: Kopf posts Events in the background, and the one queued as a process stops is
    # not the rollover's state, which is what this checks.
    kube.wait_for("the start-replacement Event", lambda: "start-replacement" in
                  _rollover_steps(kube, ns), 60)
    before_restart = _progress(_certificates(kube, ns))
    assert before_restart[0] == (2, PHASE_ORDER["TrustNew"]), before_restart
    t_restart = time.monotonic()
    old_operator, new_operator = _restart_operator(kube, op_ns, release)
    RESULTS["operator back and active s"] = round(time.monotonic() - t_restart)
    samples = [before_restart, _progress(_certificates(kube, ns))]
    stream_b = _start_stream(kube, ns, "stream-b")
    _stop_stream(kube, ns, "stream-a", stream_a)
    RESULTS["stream a stopped in phase"] = _certificates(kube, ns).get("clusterCaPhase")

    def replacements_rolled_over() -> dict | None:
        samples.append(_progress(_certificates(kube, ns)))
        return _rolled_over(kube, ns, 2, 1)
    replaced = kube.wait_for("the replacements rolled over", replacements_rolled_over, 600, 2)
    RESULTS["replacement s"] = round(time.monotonic() - t0)
    # Resumed, not restarted: the status never went back to an earlier generation or phase,
    # and the new pod took the steps after TrustNew and not the one that began it.
    assert not _went_back(samples), _went_back(samples)
    RESULTS["progress seen after the restart"] = sorted(set(samples))
    log = kube.logs(new_operator, op_ns, "operator")
    took = {step for step in ("start-replacement", "sign-with-new", "drop-old", "finish")
            if f"CA rollover {CA_SECRET}: {step} (generation 2," in log}
    assert took == {"sign-with-new", "drop-old", "finish"}, (old_operator, took, log[-3000:])
    final = _published(kube, ns)
    assert len(final) == 1 and _spki(final[0]) != _spki(original[0])
    assert replaced["brokerFingerprint"] != renewed["brokerFingerprint"]
    assert run_job(kube, ns, ["topics", SCRAM], **_scram_job())["topics"]
    stale = start_job(kube, ns, ["topics", SCRAM], **_scram_job("old-ca"))
    # carol's certificate is the new clients CA's, and it is what the brokers accept now.
    clients_ca = _certs(kube, ns, CLIENTS_CA_SECRET, "tls.crt")[0]
    assert _spki(clients_ca) != _spki(old_clients_ca)
    _certs(kube, ns, "carol", "user.crt")[0].verify_directly_issued_by(clients_ca)
    assert _certs(kube, ns, "carol") == final
    assert run_job(kube, ns, ["produce-consume", MTLS, "mtls", "20"], **_mtls_job()) == \
        {"produced": 20, "consumed_back": 20}
    _stop_stream(kube, ns, "stream-b", stream_b)
    assert kube.wait_for("the client trusting only the old CA to give up", lambda: (
        kube.get("Job", stale, ns).get("status") or {}).get("failed"), 240)
    # Events of one second have no order among them: the steps taken, counted.
    assert Counter(_rollover_steps(kube, ns)) == Counter([
        "start-renewal", "drop-old", "finish",
        "start-replacement", "sign-with-new", "drop-old", "finish"])
    print(f"\nCA renewal e2e: {RESULTS}")
