"""When the operator reissues a secured Cluster's broker and operator certificates (the pure
decision in handlers/certificates.py; the Secrets themselves are e2e's)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from rillet_operator import pki
from rillet_operator.handlers.certificates import _reason_to_issue
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
