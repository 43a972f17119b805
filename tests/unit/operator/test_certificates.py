"""When the operator reissues a secured Cluster's broker and operator certificates (the pure
decision in handlers/certificates.py), and when a CA rollover takes its next step (with the
API calls recorded; the Secrets themselves are e2e's)."""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone

from rillet_operator import ca_rollover as cr
from rillet_operator import pki, rollover_users
from rillet_operator.handlers import certificates
from rillet_operator.handlers.certificates import _reason_to_issue
from rillet_operator.kube import ApiError
from rillet_operator.spec import parse_cluster

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
CS = parse_cluster("events", "prod", {"replicas": 3, "listeners": [{"name": "a", "port": 9200}],
                                      "certificates": {"validityDays": 90, "renewalDays": 10}})
SANS = pki.broker_sans("events", "prod", 3)
CA = pki.new_ca("ca", NOW, 3650)


def _issued(at: datetime, ca: pki.KeyPair = CA, sans: list[str] = SANS) -> pki.KeyPair:
    return pki.issue_cert(ca, "events-broker", sans, at, 90, client=True, server=True)


def test_a_current_certificate_is_kept():
    assert _reason_to_issue(_issued(NOW), CA, SANS, CS, NOW, forced=False) is None
    # ... until renewalDays before it expires.
    assert _reason_to_issue(_issued(NOW), CA, SANS, CS, NOW + timedelta(days=79),
                            forced=False) is None
    assert "expires within 10 days" in _reason_to_issue(
        _issued(NOW), CA, SANS, CS, NOW + timedelta(days=81), forced=False)


def test_missing_forced_other_ca_and_grown_names_reissue():
    assert _reason_to_issue(None, CA, SANS, CS, NOW, forced=False) == "missing"
    assert _reason_to_issue(_issued(NOW), CA, SANS, CS, NOW, forced=True) == \
        "renewal requested"
    other = pki.new_ca("other", NOW, 3650)
    assert _reason_to_issue(_issued(NOW, ca=other), CA, SANS, CS, NOW, forced=False) == \
        "not signed by the current CA"
    only_bootstrap = [n for n in SANS if "bootstrap" in n]
    assert _reason_to_issue(_issued(NOW, sans=only_bootstrap), CA, SANS, CS, NOW,
                            forced=False) == "does not cover the brokers' names"
    # The operator's own certificate has no names to cover.
    client = pki.issue_cert(CA, "events-operator", [], NOW, 90, client=True, server=False)
    assert _reason_to_issue(client, CA, [], CS, NOW, forced=False) is None


def test_a_broker_secret_without_the_current_clients_ca_is_reissued():
    """A recreated clients CA reaches the brokers: their Secret is reissued (and the new
    fingerprint rolls them), else they would refuse every tls User's new certificate."""
    assert _reason_to_issue(_issued(NOW), CA, SANS, CS, NOW, forced=False,
                            carries_extra=False) == "the trusted CAs changed"


class _Kube:
    """The API calls a rollover step makes, recorded (the Secrets themselves are e2e's)."""

    def __init__(self, pods: list[dict], statefulset_replicas: int | None = 3) -> None:
        self.pods, self.patches = pods, []
        self.statefulset = None if statefulset_replicas is None else {
            "spec": {"replicas": statefulset_replicas}}

    def list(self, kind, namespace, selector):
        return self.pods

    def get(self, kind, name, namespace):
        assert (kind, name, namespace) == ("StatefulSet", "events-broker", "prod")
        return self.statefulset

    def patch(self, kind, name, patch, namespace):
        self.patches.append((kind, name, patch))


def _pod(fingerprint: str, ready: bool = True, ordinal: int = 0) -> dict:
    return {"metadata": {"name": f"events-broker-{ordinal}",
                         "annotations": {"rillet.io/broker-cert": fingerprint}},
            "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def _pods(*fingerprints: str, ordinals: range | list[int] | None = None) -> list[dict]:
    return [_pod(fp, ordinal=o) for fp, o in zip(fingerprints, ordinals or range(99))]


def _broker_secret(leaf: pki.KeyPair, cluster: cr.CaState, clients: cr.CaState) -> dict:
    secret = pki.tls_secret("events-broker-certs", leaf, cluster.bundle)
    secret["data"]["clients-ca.crt"] = pki.b64(clients.bundle)
    return secret


def _rolled_check(monkeypatch):
    """What _brokers_rolled says of pods and a StatefulSet of `replicas` (a broker Secret
    current for one cluster CA and one clients CA by default), the fingerprint of that
    Secret's leaf, and the cluster CA's state."""
    cluster = cr.CaState(CA, (CA.cert_pem,))
    clients_ca = pki.new_ca("clients", NOW, 3650)
    clients = cr.CaState(clients_ca, (clients_ca.cert_pem,))
    leaf = _issued(NOW)
    current = _broker_secret(leaf, cluster, clients)

    def rolled(pods, replicas=3, secret=current, cluster=cluster):
        monkeypatch.setattr(certificates, "kube", lambda: _Kube(pods, replicas))
        return asyncio.run(certificates._brokers_rolled(CS, secret, cluster, clients))
    return rolled, pki.fingerprint(leaf.cert_pem), cluster


def test_brokers_count_as_rolled_only_when_their_secret_and_every_pod_match(monkeypatch):
    rolled, fp, cluster = _rolled_check(monkeypatch)
    assert rolled(_pods(fp, fp, fp))
    assert not rolled(_pods(fp, fp, "old"))      # one still to restart
    assert not rolled([_pod(fp, ordinal=0), _pod(fp, ordinal=1),
                       _pod(fp, ready=False, ordinal=2)])
    assert not rolled([])
    # A CA step written but the broker Secret not yet (an operator stopped between them):
    # not rolled, whatever the pods say.
    renewed = cr.advance(cluster, cr.Action.START_RENEWAL, pki.renew_ca(CA, NOW, 3650))
    assert not rolled(_pods(fp, fp, fp), cluster=renewed)
    assert not rolled(_pods(fp, fp, fp), secret=None)


def test_a_missing_broker_keeps_the_brokers_from_counting_as_rolled(monkeypatch):
    """Every broker the StatefulSet runs must be there, ready and current: one deleted, or
    not yet created after a scale-up, would otherwise let a phase advance without it."""
    rolled, fp, _ = _rolled_check(monkeypatch)
    assert not rolled(_pods(fp, fp), replicas=3)                     # broker 2 deleted
    assert not rolled(_pods(fp, fp, ordinals=[0, 2]), replicas=3)    # broker 1 deleted
    # A scale-up to five: the StatefulSet grew, brokers 3 and 4 are not created yet.
    assert not rolled(_pods(fp, fp, fp), replicas=5)
    assert rolled(_pods(fp, fp, fp, fp, fp), replicas=5)
    # A scale-down from five still draining: the StatefulSet (not spec.replicas, 3) says
    # which brokers run, and each of them must run the current Secrets.
    assert not rolled(_pods(fp, fp, fp, fp), replicas=5)
    assert not rolled(_pods(fp, fp, fp, fp, "old"), replicas=5)
    # No StatefulSet: no brokers run anything.
    assert not rolled(_pods(fp, fp, fp), replicas=None)
    # A pod of a broker the StatefulSet no longer runs, still terminating after a scale-down.
    going = _pod("old", ordinal=3)
    going["metadata"]["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    assert not rolled(_pods(fp, fp, fp) + [going], replicas=3)


def test_a_rollover_step_patches_the_ca_secret_and_a_brought_ca_never_steps(monkeypatch):
    fake = _Kube([])
    monkeypatch.setattr(certificates, "kube", lambda: fake)
    monkeypatch.setattr(certificates.kopf, "info", lambda *a, **k: None)
    state = cr.CaState(CA, (CA.cert_pem,), replace_requested=True)
    after = asyncio.run(certificates._rollover_step(CS, "events-cluster-ca", "events cluster CA",
                                                    state, True, NOW, None, logging.getLogger()))
    assert after.phase == cr.TRUST_NEW and after.pending is not None
    assert pki.principal_of(after.pending.cert_pem) == "User:CN=events cluster CA v1"
    [(kind, name, patch)] = fake.patches
    assert (kind, name) == ("Secret", "events-cluster-ca") and patch == cr.secret_patch(after)
    byo = parse_cluster("events", "prod", {"replicas": 3, "listeners": [{"name": "a",
                                                                         "port": 9200}],
                                           "certificates": {"generateCertificateAuthority":
                                                            False}})
    assert asyncio.run(certificates._rollover_step(byo, "events-cluster-ca", "x", state, True,
                                                   NOW, None, None)) is state
    assert len(fake.patches) == 1


def test_validity_and_renewal_days_that_would_renew_a_new_ca_forever_are_refused():
    """renewalDays decides when a CA (3650 days) renews too: a leaf validity as long as the CA's
    would make every new CA due at once, so the brokers would roll for ever."""
    import pytest

    from rillet_operator.spec import SpecError, parse_certificates
    with pytest.raises(SpecError, match=r"validityDays \(4000\) must be less than the CAs' "
                                        r"validity \(3650 days\)"):
        parse_certificates({"validityDays": 4000, "renewalDays": 3700})
    with pytest.raises(SpecError, match=r"renewalDays \(90\) must be less than validityDays"):
        parse_certificates({"validityDays": 90, "renewalDays": 90})
    assert parse_certificates({"validityDays": 3649, "renewalDays": 30}).validity_days == 3649


def test_the_clients_ca_drops_its_old_certificate_only_once_every_user_is_re_signed():
    """DropOld of a clients-CA replacement waits for the Users: a User certificate still signed
    by the old CA (its User paused, refused, or its pass not come yet) holds the rollover in
    SignNew; Secrets that are not a User's (the brokers') are not looked at."""
    old_ca = pki.new_ca("events clients CA", NOW, 3650)
    new_ca = pki.new_ca("events clients CA v1", NOW, 3650)

    def user_secret(name: str, ca: pki.KeyPair) -> dict:
        cert = pki.issue_cert(ca, name, [], NOW, 30, client=True, server=False)
        return {"metadata": {"name": name, "labels": {"rillet.io/cluster": "events",
                                                      "rillet.io/user": name}},
                "data": {"user.crt": pki.b64(cert.cert_pem)}}
    broker = {"metadata": {"name": "events-broker-certs",
                           "labels": {"rillet.io/cluster": "events"}},
              "data": {"tls.crt": pki.b64(_issued(NOW).cert_pem)}}
    scram_user = {"metadata": {"labels": {"rillet.io/cluster": "events",
                                          "rillet.io/user": "s"}}, "data": {}}
    behind = [broker, scram_user, user_secret("a", new_ca), user_secret("b", old_ca)]
    assert rollover_users.not_signed_by(behind, new_ca.cert_pem, "prod") == [
        rollover_users.LaggingUser("prod", "b", rollover_users.LACKS_SIGNATURE)]
    caught_up = [broker, scram_user, user_secret("a", new_ca), user_secret("b", new_ca)]
    assert rollover_users.not_signed_by(caught_up, new_ca.cert_pem, "prod") == []


def test_the_users_secrets_are_found_through_the_users_of_this_cluster(monkeypatch):
    """Through the User resources and a get per Secret: the operator is not given list on
    Secrets. Users of another Cluster, and a User whose Secret is not made yet, are left out."""
    class Kube:
        def list(self, kind, namespace):
            assert (kind, namespace) == ("User", "prod")
            return [{"metadata": {"name": n}, "spec": {"cluster": c}}
                    for n, c in (("a", "events"), ("b", "other"), ("c", "events"))]

        def get(self, kind, name, namespace):
            assert kind == "Secret" and namespace == "prod"
            return {"metadata": {"name": name}} if name != "c" else None
    monkeypatch.setattr(certificates, "kube", lambda: Kube())
    found = asyncio.run(certificates._user_secrets(CS))
    assert [s["metadata"]["name"] for s in found] == ["a"]


def _merge(target: dict, patch: dict) -> dict:
    """RFC 7386 merge patch, as the API server applies one."""
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            out[k] = _merge(out.get(k) or {}, v)
        else:
            out[k] = v
    return out


class _SecretServer:
    """One Secret behind the API server's optimistic concurrency: a patch naming a
    resourceVersion other than the stored one is refused with 409 Conflict, as the server
    does; every accepted write bumps it."""

    def __init__(self, secret: dict) -> None:
        self.secret = _merge(_merge({}, secret), {"metadata": {"resourceVersion": "1"}})
        self.conflicts = 0

    def get(self, kind, name, namespace):
        assert kind == "Secret"
        return self.secret

    def patch(self, kind, name, patch, namespace):
        want = (patch.get("metadata") or {}).get("resourceVersion")
        have = self.secret["metadata"]["resourceVersion"]
        if want is not None and want != have:
            self.conflicts += 1
            raise ApiError(409, "Operation cannot be fulfilled on secrets: the object has "
                                "been modified; please apply your changes to the latest version")
        self.secret = _merge(self.secret, patch)
        self.secret["metadata"]["resourceVersion"] = str(int(have) + 1)
        return self.secret

    def annotate(self, key: str, value: str) -> None:
        """A user's `kubectl annotate`."""
        self.patch("Secret", "", {"metadata": {"annotations": {key: value}}}, "")


def test_a_request_annotated_between_read_and_step_is_kept(monkeypatch, caplog):
    """The CA Secret's patch carries the resourceVersion it was read at: a `force-renew` a
    user adds meanwhile makes it conflict (it would otherwise remove the annotation, which the
    step writes as consumed); the pass goes on with the Secret re-read and the next pass takes
    the step, the request still there, then honoured once the rollover ends."""
    new = pki.new_ca("events cluster CA v1", NOW, 3650)
    server = _SecretServer(cr.secret_patch(cr.advance(
        cr.CaState(CA, (CA.cert_pem,)), cr.Action.START_REPLACEMENT, new)))
    monkeypatch.setattr(certificates, "kube", lambda: server)
    monkeypatch.setattr(certificates.kopf, "info", lambda *a, **k: None)
    log = logging.getLogger("test")

    def step(state):
        return asyncio.run(certificates._rollover_step(CS, "events-cluster-ca",
                                                       "events cluster CA", state, True, NOW,
                                                       None, log))

    read = cr.read(server.secret)                 # TrustNew, read at resourceVersion 1
    assert read.phase == cr.TRUST_NEW and read.resource_version == "1"
    server.annotate(cr.FORCE_RENEW, "true")       # the user, before this pass's step
    with caplog.at_level(logging.INFO, logger="test"):
        after = step(read)
    assert server.conflicts == 1 and "conflict" in caplog.text.lower()
    # Nothing written; the pass goes on with the Secret as it is now.
    assert after == cr.read(server.secret) and after.phase == cr.TRUST_NEW
    assert after.renew_requested
    # The next pass takes the step, and keeps the request until the rollover is over.
    after = step(cr.read(server.secret))
    assert after.phase == cr.SIGN_NEW and cr.FORCE_RENEW in \
        server.secret["metadata"]["annotations"]
    for phase in (cr.DROP_OLD, cr.IDLE, cr.SIGN_NEW):
        after = step(cr.read(server.secret))
        assert after.phase == phase
    # The renewal the user asked for: started once the replacement was done, request consumed.
    assert after.generation == 2 and cr.FORCE_RENEW not in \
        server.secret["metadata"]["annotations"]
    assert server.conflicts == 1


class _Api:
    """Objects by (kind, name) behind get, list, create, patch and apply (merge patches),
    for a whole certificates pass."""

    def __init__(self, objects: dict[tuple[str, str], dict]) -> None:
        self.objects = {key: _merge({}, obj) for key, obj in objects.items()}

    def get(self, kind, name, namespace=None):
        return self.objects.get((kind, name))

    def list(self, kind, namespace=None, selector=None):
        return [o for (k, _), o in self.objects.items() if k == kind]

    def create(self, obj):
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return obj

    def patch(self, kind, name, patch, namespace=None):
        self.objects[(kind, name)] = _merge(self.objects[(kind, name)], patch)
        return self.objects[(kind, name)]

    def apply(self, obj):
        key = (obj["kind"], obj["metadata"]["name"])
        self.objects[key] = _merge(self.objects.get(key, {}), obj)


def test_a_cluster_ca_replacement_signs_with_the_new_key_only_once_every_user_trusts_it(
        monkeypatch):
    """TrustNew -> SignNew of the cluster CA: after it the brokers present leaves of the new
    key. A tls User's Secret whose ca.crt still holds only the old CA (its User paused, or its
    pass not come yet) would refuse them, so the step waits for it, brokers rolled or not."""
    new = pki.new_ca("events cluster CA v1", NOW, 3650)
    trust_new = cr.advance(cr.CaState(CA, (CA.cert_pem,)), cr.Action.START_REPLACEMENT, new)
    clients_ca = pki.new_ca("events clients CA", NOW, 3650)
    clients = cr.CaState(clients_ca, (clients_ca.cert_pem,))
    leaf = _issued(NOW)
    operator = pki.issue_cert(CA, "events-operator", [], NOW, 90, client=True, server=False)
    alice = pki.issue_cert(clients_ca, "alice", [], NOW, 90, client=True, server=False)

    def user_secret(name: str, **data: str) -> dict:
        return {"kind": "Secret", "metadata": {"name": name, "labels": {
            "rillet.io/cluster": "events", "rillet.io/user": name}},
            "data": {k: pki.b64(v) for k, v in data.items()}}
    fp = pki.fingerprint(leaf.cert_pem)
    api = _Api({
        ("Secret", "events-cluster-ca"): cr.secret_patch(trust_new),
        ("Secret", "events-clients-ca"): cr.secret_patch(clients),
        ("Secret", "events-broker-certs"): _broker_secret(leaf, trust_new, clients),
        ("Secret", "events-operator-certs"): pki.tls_secret("events-operator-certs", operator,
                                                            trust_new.bundle),
        ("StatefulSet", "events-broker"): {"spec": {"replicas": 3}},
        **{("Pod", f"events-broker-{i}"): _pod(fp, ordinal=i) for i in range(3)},
        ("User", "alice"): {"metadata": {"name": "alice"}, "spec": {"cluster": "events"}},
        ("User", "bob"): {"metadata": {"name": "bob"}, "spec": {"cluster": "events"}},
        # alice (tls) as her last pass left her Secret: the old CA alone; bob is SCRAM.
        ("Secret", "alice"): user_secret("alice", **{"user.crt": alice.cert_pem,
                                                     "ca.crt": CA.cert_pem}),
        ("Secret", "bob"): user_secret("bob", password="p"),
    })
    monkeypatch.setattr(certificates, "kube", lambda: api)
    for event in ("info", "warn"):
        monkeypatch.setattr(certificates.kopf, event, lambda *a, **k: None)
    owner = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
             "metadata": {"name": "events", "namespace": "prod", "uid": "u"}}

    waiting = []

    def phase() -> str:
        issued = asyncio.run(certificates.ensure(CS, {}, {}, owner, logging.getLogger()))
        waiting.append(issued.users_waiting)
        return issued.status["clusterCaPhase"]

    assert phase() == cr.TRUST_NEW and phase() == cr.TRUST_NEW
    # The Cluster's condition names her as what the step waits for (bob, SCRAM, never).
    assert waiting[-1] == (rollover_users.LaggingUser("prod", "alice",
                                                      rollover_users.LACKS_TRUST),)
    # alice's pass comes: her Secret trusts both (as the published cluster-ca-cert does).
    api.objects[("Secret", "alice")]["data"]["ca.crt"] = pki.b64(trust_new.bundle)
    assert phase() == cr.SIGN_NEW
    assert waiting[-1] == ()
