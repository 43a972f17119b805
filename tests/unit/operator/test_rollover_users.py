"""The tls Users that hold a CA rollover (rollover_users.py): which lag and why, the condition
CertificateRolloverWaiting that names them, and a Cluster pass over a fake API server that
writes it beside Ready with one Event per change."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import kopf
import pytest

from rillet_operator import pki
from rillet_operator import rollover_users as ru
from rillet_operator.handlers import certificates, cluster, common
from tests.unit.operator.test_cluster_reconcile import FakeKube, _Logger

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"
OLD_CA = pki.new_ca("events cluster CA", NOW, 3650)
NEW_CA = pki.new_ca("events cluster CA v1", NOW, 3650)
OLD_CLIENTS = pki.new_ca("events clients CA", NOW, 3650)
NEW_CLIENTS = pki.new_ca("events clients CA v1", NOW, 3650)


def _user_secret(name: str, trusts: list[pki.KeyPair] | None = None,
                 signer: pki.KeyPair | None = None) -> dict:
    data = {}
    if trusts is not None:
        data["ca.crt"] = pki.b64(pki.join_pems([ca.cert_pem for ca in trusts]))
    if signer is not None:
        data["user.crt"] = pki.b64(pki.issue_cert(signer, name, [], NOW, 30, client=True,
                                                  server=False).cert_pem)
    return {"metadata": {"name": name, "labels": {"rillet.io/cluster": "events",
                                                  "rillet.io/user": name}}, "data": data}


def _cond(conditions: list[dict]) -> dict | None:
    return next((c for c in conditions if c["type"] == "CertificateRolloverWaiting"), None)


def test_the_users_whose_secret_lacks_the_new_ca_are_named_with_what_they_lack() -> None:
    """Only Users' Secrets count (not the brokers'); a SCRAM User (no ca.crt, no user.crt)
    never holds either step."""
    broker = {"metadata": {"name": "events-broker-certs",
                           "labels": {"rillet.io/cluster": "events"}},
              "data": {"ca.crt": pki.b64(OLD_CA.cert_pem)}}
    secrets = [broker, _user_secret("scram"),
               _user_secret("carol", [OLD_CA, NEW_CA], NEW_CLIENTS),
               _user_secret("alice", [OLD_CA], OLD_CLIENTS),
               _user_secret("bob", [OLD_CA, NEW_CA], OLD_CLIENTS)]
    assert ru.not_trusting(secrets, NEW_CA.cert_pem, "prod") == [
        ru.LaggingUser("prod", "alice", ru.LACKS_TRUST)]
    assert sorted(ru.not_signed_by(secrets, NEW_CLIENTS.cert_pem, "prod")) == [
        ru.LaggingUser("prod", "alice", ru.LACKS_SIGNATURE),
        ru.LaggingUser("prod", "bob", ru.LACKS_SIGNATURE)]
    caught_up = [broker, _user_secret("a", [OLD_CA, NEW_CA], NEW_CLIENTS)]
    assert ru.not_trusting(caught_up, NEW_CA.cert_pem, "prod") == []
    assert ru.not_signed_by(caught_up, NEW_CLIENTS.cert_pem, "prod") == []


def test_the_message_names_users_sorted_once_each_and_counts_past_ten() -> None:
    both = [ru.LaggingUser("prod", "zed", ru.LACKS_SIGNATURE),
            ru.LaggingUser("prod", "amy", ru.LACKS_TRUST),
            ru.LaggingUser("prod", "amy", ru.LACKS_SIGNATURE)]
    text = ru.message(both)
    assert text.startswith("the CA rollover waits for 2 Users: prod/amy (ca.crt does not trust "
                           "the new cluster CA; certificate not signed by the new clients CA), "
                           "prod/zed (certificate not signed by the new clients CA)")
    many = [ru.LaggingUser("prod", f"u{i:02d}", ru.LACKS_TRUST) for i in range(13)]
    text = ru.message(list(reversed(many)))
    assert "waits for 13 Users" in text
    assert "prod/u09 (" in text and "prod/u10" not in text
    assert "prod/u00 (ca.crt does not trust the new cluster CA), prod/u01" in text
    assert "and 3 more" in text


def test_the_condition_is_set_while_users_lag_and_turns_false_once_none_does() -> None:
    ready = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
              "lastTransitionTime": T0}]
    alice = [ru.LaggingUser("prod", "alice", ru.LACKS_TRUST)]
    assert ru.waiting_conditions(ready, (), T0) is None          # never waited: no condition
    assert ru.waiting_conditions(ready, None, T0) is None        # not looked at
    waiting = ru.waiting_conditions(ready, alice, T0)
    assert waiting is not None
    cond = _cond(waiting)
    assert (cond["status"], cond["reason"]) == ("True", "WaitingForUsers")
    assert "prod/alice (ca.crt does not trust the new cluster CA)" in cond["message"]
    assert next(c for c in waiting if c["type"] == "Ready") == ready[0]   # left as it was
    assert ru.waiting_conditions(waiting, alice, T1) is None     # unchanged: nothing to write
    assert ru.waiting_conditions(waiting, None, T1) is None      # brokers rolling: kept
    more = ru.waiting_conditions(waiting, alice + [
        ru.LaggingUser("prod", "bob", ru.LACKS_SIGNATURE)], T1)
    cond = _cond(more)
    assert "prod/bob" in cond["message"] and cond["lastTransitionTime"] == T0   # still True
    done = ru.waiting_conditions(more, (), T2)
    cond = _cond(done)
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False", "NotWaitingForUsers", T2)
    assert ru.waiting_conditions(done, (), T2) is None           # already False


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    monkeypatch.setattr(kopf, "info", lambda obj, reason, message="": out.append(
        ("Normal", reason, message)))
    monkeypatch.setattr(kopf, "warn", lambda obj, reason, message="": out.append(
        ("Warning", reason, message)))
    return out


def test_a_pass_writes_the_condition_beside_ready_with_one_event_per_change(
        monkeypatch, posted) -> None:
    """Three passes with alice lagging, then one with none: the condition is in the status the
    pass wrote (Ready's own update keeps it), the WaitingForUsers Event comes once, and
    NotWaitingForUsers once when the rollover moves on."""
    operator = pki.issue_cert(OLD_CA, "c-operator", [], NOW, 90, client=True, server=False)
    waiting: list[tuple[ru.LaggingUser, ...] | None] = [
        (ru.LaggingUser("ns", "alice", ru.LACKS_TRUST),)]

    async def ensure(cs, meta, status, owner, logger, external_names=None):
        return certificates.Issued("fp", {}, operator, OLD_CA.cert_pem, waiting[0])
    monkeypatch.setattr(certificates, "ensure", ensure)
    fake = FakeKube()
    monkeypatch.setattr(common, "_kube", fake)
    body = {"apiVersion": "rillet.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": 1}}
    spec = {"replicas": 1, "listeners": [{"name": "a", "port": 9200}]}

    def one_pass() -> dict:
        asyncio.run(cluster.reconcile(body=body, meta=body["metadata"], spec=spec, status={},
                                      name="c", namespace="ns", patch=kopf.Patch(),
                                      logger=_Logger(), memo={}))
        return fake.objects[("Cluster", "c")]["status"]

    def ours() -> list[tuple[str, str, str]]:
        return [e for e in posted if e[1] in (ru.WAITING, ru.NOT_WAITING)]

    for _ in range(3):
        status = one_pass()
        cond = _cond(status["conditions"])
        assert (cond["status"], cond["reason"]) == ("True", "WaitingForUsers")
        assert "ns/alice (ca.crt does not trust the new cluster CA)" in cond["message"]
        assert any(c["type"] == "Ready" for c in status["conditions"])
    assert [e[:2] for e in ours()] == [("Normal", "WaitingForUsers")]
    assert "ns/alice" in ours()[0][2]
    waiting[0] = None              # the brokers roll again: the Users were not looked at
    assert _cond(one_pass()["conditions"])["status"] == "True"
    waiting[0] = ()
    cond = _cond(one_pass()["conditions"])
    assert (cond["status"], cond["reason"]) == ("False", "NotWaitingForUsers")
    one_pass()
    assert [e[:2] for e in ours()] == [("Normal", "WaitingForUsers"),
                                       ("Normal", "NotWaitingForUsers")]
