"""A generated CA's renewal and replacement: the trust rollover as a pure phase machine.

Strimzi's order, so that no connection breaks: the new CA certificate is trusted beside the old
one everywhere (the CA Secret's ca.crt, the published `<cluster>-cluster-ca-cert`, the
brokers' truststores, the operator's and the Users' ca.crt), the brokers roll; then leaves are
signed by the new CA, the brokers roll; then the old CA leaves the bundles, the brokers roll.

- Replacement (a new key, `rillet.io/force-replace` on the CA Secret) takes all three phases:
  TrustNew -> roll -> SignNew -> roll -> DropOld -> roll -> idle. A leaf signed by the new key
  is only accepted by a peer that already trusts the new certificate, hence the first roll
  before anything is signed with it; for the cluster CA the caller also counts TrustNew as
  rolled only once every tls User's Secret trusts the new certificate (its ca.crt), as those
  clients are peers of the brokers too.
- Renewal (the same key, a new validity: `rillet.io/force-renew` on the CA Secret, or
  `renewalDays` before the CA expires) starts at SignNew, with both certificates in the bundle
  and the leaves re-signed in one roll: a leaf signed under the same key and subject verifies
  against either certificate, so a broker not yet restarted (trusting only the old one)
  accepts a restarted one's new leaf and the other way round. DropOld still rolls, so no
  broker keeps a retired certificate in its truststore.
- For the clients CA the brokers' leaf is not signed by it: its SignNew step changes no broker
  file; the Users' certificates are re-signed (handlers/user.py) as soon as the signer changes,
  and the caller counts the step as rolled only once every User certificate is signed by the
  new CA (handlers/certificates.py), so DropOld never locks a User out.

`rolled` is the caller's observation that every broker runs the certificate Secrets that the
current CA state asks for (pods carry their fingerprint and are ready). The phase and the
generation are annotations on the CA Secret, written together with its data, so an operator
restarted mid-way resumes where the Secret says (as Strimzi's ca-cert-generation). Each
step's patch names the resourceVersion the Secret was read at: the API server refuses it
(409 Conflict) if anything changed the Secret since, so a request annotation added meanwhile
is never lost by the step that clears consumed requests, and the step is taken again from
what the Secret then holds. Only CAs the operator generated roll over: a CA the user brought
is theirs to replace.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Mapping

from . import pki

PHASE_ANNOTATION = "rillet.io/ca-rollover-phase"
GENERATION_ANNOTATION = "rillet.io/ca-cert-generation"
FORCE_RENEW = "rillet.io/force-renew"
FORCE_REPLACE = "rillet.io/force-replace"
# The new CA's key and certificate while only trusted, not yet signing (TrustNew).
NEXT_KEY, NEXT_CRT = "next.key", "next.crt"

IDLE, TRUST_NEW, SIGN_NEW, DROP_OLD = "", "TrustNew", "SignNew", "DropOld"
PHASES = (IDLE, TRUST_NEW, SIGN_NEW, DROP_OLD)


class Action(enum.Enum):
    NONE = "none"                      # nothing to do
    WAIT_FOR_ROLL = "wait-for-roll"    # a phase is done once the brokers run it
    START_RENEWAL = "start-renewal"
    START_REPLACEMENT = "start-replacement"
    SIGN_WITH_NEW = "sign-with-new"
    DROP_OLD = "drop-old"
    FINISH = "finish"


@dataclass(frozen=True)
class CaState:
    """A generated CA Secret, read: who signs, who is trusted, the rollover's progress."""
    signer: pki.KeyPair                 # tls.key, tls.crt: signs leaves now
    trusted: tuple[str, ...]            # ca.crt: every CA certificate peers accept now
    pending: pki.KeyPair | None = None  # next.key, next.crt: trusted, not yet signing
    phase: str = IDLE
    generation: int = 0
    renew_requested: bool = False
    replace_requested: bool = False
    resource_version: str = ""          # the Secret's, as read: the next patch's precondition

    @property
    def bundle(self) -> str:
        return pki.join_pems(self.trusted)


def next_action(state: CaState, now: datetime, renewal_days: int, rolled: bool) -> Action:
    """The one step to take now. A request that comes during a rollover waits for it to end
    (its annotation stays until a rollover starts for it)."""
    if state.phase == IDLE:
        if state.replace_requested:
            return Action.START_REPLACEMENT
        if state.renew_requested or pki.needs_renewal(state.signer.cert_pem, now,
                                                      renewal_days):
            return Action.START_RENEWAL
        return Action.NONE
    if not rolled:
        return Action.WAIT_FOR_ROLL
    if state.phase == TRUST_NEW:
        return Action.SIGN_WITH_NEW if state.pending else Action.DROP_OLD
    if state.phase == SIGN_NEW:
        return Action.DROP_OLD
    return Action.FINISH


def advance(state: CaState, action: Action, new_ca: pki.KeyPair | None = None) -> CaState:
    """The CA state after `action`; the start actions take the new CA (renew_ca's or
    new_ca's result), made by the caller so that this stays free of key generation."""
    if action in (Action.START_RENEWAL, Action.START_REPLACEMENT):
        if new_ca is None:
            raise ValueError(f"{action.value} needs the new CA")
        started = replace(state, trusted=_with(state.trusted, new_ca.cert_pem),
                          generation=state.generation + 1, renew_requested=False,
                          replace_requested=False)
        if action is Action.START_RENEWAL:
            return replace(started, signer=new_ca, pending=None, phase=SIGN_NEW)
        return replace(started, pending=new_ca, phase=TRUST_NEW)
    if action is Action.SIGN_WITH_NEW:
        assert state.pending is not None
        return replace(state, signer=state.pending, pending=None, phase=SIGN_NEW)
    if action is Action.DROP_OLD:
        return replace(state, trusted=(state.signer.cert_pem,), phase=DROP_OLD)
    if action is Action.FINISH:
        return replace(state, phase=IDLE)
    return state


def _with(trusted: tuple[str, ...], cert_pem: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*trusted, cert_pem)))


def read(secret: Mapping) -> CaState:
    """A generated CA Secret's state (KeyError/ValueError if it holds no CA). A Secret from
    before rollovers existed has ca.crt = tls.crt and no annotations: idle, generation 0."""
    signer = pki.keypair_from_secret(secret)
    trusted = pki.split_pems(pki.secret_text_or_none(secret, "ca.crt") or "") or \
        (signer.cert_pem,)
    next_key = pki.secret_text_or_none(secret, NEXT_KEY)
    next_crt = pki.secret_text_or_none(secret, NEXT_CRT)
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    phase = annotations.get(PHASE_ANNOTATION, IDLE)
    try:
        generation = int(annotations.get(GENERATION_ANNOTATION, "0"))
    except ValueError:
        generation = 0
    return CaState(signer, trusted,
                   pki.KeyPair(next_key, next_crt) if next_key and next_crt else None,
                   phase if phase in PHASES else IDLE, generation,
                   FORCE_RENEW in annotations, FORCE_REPLACE in annotations,
                   str((secret.get("metadata") or {}).get("resourceVersion") or ""))


def secret_patch(state: CaState) -> dict:
    """What the CA Secret's data and annotations become (None removes a key, as a merge
    patch does): the request annotations go once a rollover has started for them. With the
    resourceVersion the state was read at, the patch applies only to that version of the
    Secret (optimistic concurrency: 409 Conflict otherwise)."""
    data = {"tls.key": pki.b64(state.signer.key_pem),
            "tls.crt": pki.b64(state.signer.cert_pem), "ca.crt": pki.b64(state.bundle),
            NEXT_KEY: pki.b64(state.pending.key_pem) if state.pending else None,
            NEXT_CRT: pki.b64(state.pending.cert_pem) if state.pending else None}
    annotations = {PHASE_ANNOTATION: state.phase or None,
                   GENERATION_ANNOTATION: str(state.generation)}
    if not state.renew_requested:
        annotations[FORCE_RENEW] = None
    if not state.replace_requested:
        annotations[FORCE_REPLACE] = None
    metadata: dict = {"annotations": annotations}
    if state.resource_version:
        metadata["resourceVersion"] = state.resource_version
    return {"metadata": metadata, "data": data}
