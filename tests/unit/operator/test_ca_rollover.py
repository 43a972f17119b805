"""The CA rollover's phase machine (ca_rollover.py): which step comes next, what each step
leaves in the CA Secret, and that the leaves of every phase verify against what every peer
trusts at that point (the property that keeps connections working)."""
from __future__ import annotations

import base64
import ssl
from datetime import datetime, timedelta, timezone

import pytest

from rillet_operator import ca_rollover as cr
from rillet_operator import pki

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
CA = pki.new_ca("events cluster CA", NOW, 365)
A = cr.Action


def _idle(ca: pki.KeyPair = CA, **kw) -> cr.CaState:
    return cr.CaState(ca, (ca.cert_pem,), **kw)


def test_an_idle_ca_far_from_expiry_does_nothing():
    assert cr.next_action(_idle(), NOW, 30, rolled=True) is A.NONE


def test_renewal_days_before_expiry_or_on_request_starts_a_renewal():
    assert cr.next_action(_idle(), NOW + timedelta(days=336), 30, rolled=True) is A.START_RENEWAL
    assert cr.next_action(_idle(renew_requested=True), NOW, 30, True) is A.START_RENEWAL
    # A replacement request wins over a renewal.
    assert cr.next_action(_idle(renew_requested=True, replace_requested=True), NOW, 30,
                          True) is A.START_REPLACEMENT


def test_a_phase_moves_on_only_once_the_brokers_rolled():
    for phase in (cr.TRUST_NEW, cr.SIGN_NEW, cr.DROP_OLD):
        state = _idle(phase=phase, pending=CA if phase == cr.TRUST_NEW else None)
        assert cr.next_action(state, NOW, 30, rolled=False) is A.WAIT_FOR_ROLL
    assert cr.next_action(_idle(phase=cr.TRUST_NEW, pending=CA), NOW, 30, True) is \
        A.SIGN_WITH_NEW
    assert cr.next_action(_idle(phase=cr.SIGN_NEW), NOW, 30, True) is A.DROP_OLD
    assert cr.next_action(_idle(phase=cr.DROP_OLD), NOW, 30, True) is A.FINISH


def test_a_request_during_a_rollover_waits_for_it_to_end():
    state = _idle(phase=cr.SIGN_NEW, replace_requested=True)
    assert cr.next_action(state, NOW, 30, rolled=True) is A.DROP_OLD
    done = cr.advance(cr.advance(state, A.DROP_OLD), A.FINISH)
    assert done.replace_requested and cr.next_action(done, NOW, 30, True) is \
        A.START_REPLACEMENT


def _run(state: cr.CaState, new_ca: pki.KeyPair) -> list[cr.CaState]:
    """Every state of one rollover, the brokers rolling after each step."""
    states = [state]
    while True:
        action = cr.next_action(states[-1], NOW, 30, rolled=True)
        if action is A.NONE:
            return states
        states.append(cr.advance(states[-1], action, new_ca))


def test_a_replacement_trusts_the_new_ca_before_signing_with_it_and_drops_the_old_last():
    new = pki.new_ca("events cluster CA v1", NOW, 365)
    states = _run(_idle(replace_requested=True), new)
    assert [s.phase for s in states] == ["", cr.TRUST_NEW, cr.SIGN_NEW, cr.DROP_OLD, ""]
    trust_new, sign_new, drop_old, done = states[1:]
    assert trust_new.signer == CA and trust_new.pending == new
    assert set(trust_new.trusted) == {CA.cert_pem, new.cert_pem}
    assert sign_new.signer == new and sign_new.pending is None
    assert set(sign_new.trusted) == {CA.cert_pem, new.cert_pem}
    assert drop_old.trusted == (new.cert_pem,) == done.trusted
    assert done.generation == 1 and not done.replace_requested


def test_a_renewal_keeps_the_key_and_signs_with_the_new_certificate_in_its_first_roll():
    renewed = pki.renew_ca(CA, NOW + timedelta(days=340), 365)
    assert renewed.key_pem == CA.key_pem and renewed.cert_pem != CA.cert_pem
    states = _run(_idle(renew_requested=True), renewed)
    assert [s.phase for s in states] == ["", cr.SIGN_NEW, cr.DROP_OLD, ""]
    assert states[1].signer == renewed and set(states[1].trusted) == {CA.cert_pem,
                                                                     renewed.cert_pem}
    assert states[-1].trusted == (renewed.cert_pem,)


def _verifies(leaf: pki.KeyPair, trusted: tuple[str, ...], tmp_path) -> bool:
    """Whether a TLS client trusting `trusted` accepts `leaf`: a real OpenSSL handshake over
    memory BIOs, as the brokers and Python clients build chains."""
    chain = tmp_path / "leaf.pem"
    chain.write_text(leaf.key_pem + leaf.cert_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(chain))
    client_ctx = ssl.create_default_context(cadata=pki.join_pems(trusted))
    assert len(client_ctx.get_ca_certs()) == len(trusted)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="b")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        done = 0
        for end, out, peer_in in ((client, c_out, s_in), (server, s_out, c_in)):
            try:
                end.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
            peer_in.write(out.read())
        if done == 2:
            return True
    raise AssertionError("the handshake did not finish")


@pytest.mark.parametrize("replace", [False, True])
def test_every_leaf_in_use_is_accepted_by_every_peer_at_every_phase(replace, tmp_path):
    """Peers run either the Secrets of the previous phase or of the current one while the
    brokers roll: each one's leaf must verify against the other's trust."""
    new = pki.new_ca("events cluster CA v1", NOW, 365) if replace else \
        pki.renew_ca(CA, NOW, 365)
    states = _run(_idle(replace_requested=replace, renew_requested=not replace), new)
    leaves = [pki.issue_cert(s.signer, "broker", ["b"], NOW, 30, client=True, server=True)
              for s in states]
    for i in range(1, len(states)):
        for leaf in (leaves[i - 1], leaves[i]):
            for trusted in (states[i - 1].trusted, states[i].trusted):
                assert _verifies(leaf, trusted, tmp_path), (states[i].phase, i)
    # ... and the check has teeth: the new key's leaf is refused by the old trust alone.
    if replace:
        assert not _verifies(leaves[-1], states[0].trusted, tmp_path)


def test_a_secret_round_trips_through_its_patch():
    new = pki.new_ca("v1", NOW, 365)
    state = cr.advance(_idle(replace_requested=True), A.START_REPLACEMENT, new)
    patch = cr.secret_patch(state)
    secret = {"metadata": {"annotations": {k: v for k, v in patch["metadata"]["annotations"]
                                           .items() if v is not None}},
              "data": {k: v for k, v in patch["data"].items() if v is not None}}
    assert cr.read(secret) == state
    assert patch["metadata"]["annotations"][cr.FORCE_REPLACE] is None   # request consumed
    done = cr.advance(cr.advance(cr.advance(state, A.SIGN_WITH_NEW), A.DROP_OLD), A.FINISH)
    patch = cr.secret_patch(done)
    assert patch["data"][cr.NEXT_KEY] is None and \
        patch["metadata"]["annotations"][cr.PHASE_ANNOTATION] is None
    assert base64.b64decode(patch["data"]["ca.crt"]).decode() == new.cert_pem


def test_a_secret_from_before_rollovers_reads_as_idle_generation_zero():
    secret = pki.ca_secret("events-cluster-ca", CA)
    assert cr.read(secret) == _idle()
    secret["metadata"]["annotations"] = {cr.FORCE_RENEW: "true"}
    assert cr.read(secret).renew_requested
