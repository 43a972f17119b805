"""The controller's decisions on SCRAM credentials and ACLs: requests in, metadata records and
per-item errors out. Pure: the active controller commits the records under its lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..metadata import records as mrec
from ..metadata.image import MetadataImage
from ..protocol import errors
from ..defs.acl import AclBinding
from ..defs.sasl import SCRAM_MECHANISMS
from ..security.acl import AclFilter
from ..security.scram_credential import MAX_ITERATIONS, MIN_ITERATIONS, scram_credential


@dataclass(frozen=True)
class ScramChange:
    """One upsertion or deletion of an AlterUserScramCredentials request."""
    user: str
    mechanism_code: int
    # Upsertions only: what AlterUserScramCredentials carries (the client salts and hashes).
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes | None = None    # None: a deletion


def scram_changes(image: MetadataImage, changes: list[ScramChange]
                  ) -> tuple[list[dict[str, Any]], dict[str, errors.KafkaError | None]]:
    """Records for AlterUserScramCredentials and each user's outcome, Kafka's checks first:
    a user named twice for one mechanism is refused (DUPLICATE_RESOURCE), an unknown
    mechanism, an iteration count outside [4096, 16384] or an empty user
    (UNACCEPTABLE_CREDENTIAL), deleting what does not exist (RESOURCE_NOT_FOUND). A user
    with any refused change gets none of its changes applied."""
    outcome: dict[str, errors.KafkaError | None] = {}
    seen: dict[tuple[str, int], int] = {}
    for c in changes:
        seen[(c.user, c.mechanism_code)] = seen.get((c.user, c.mechanism_code), 0) + 1
    for c in changes:
        outcome.setdefault(c.user, None)
        if outcome[c.user] is not None:
            continue
        mechanism = SCRAM_MECHANISMS.get(c.mechanism_code)
        if not c.user:
            outcome[c.user] = errors.UnacceptableCredential("the user name is empty")
        elif seen[(c.user, c.mechanism_code)] > 1:
            outcome[c.user] = errors.DuplicateResource(
                f"{c.user} is named more than once for one mechanism")
        elif mechanism is None:
            outcome[c.user] = errors.UnsupportedSaslMechanism(
                f"unknown SCRAM mechanism code {c.mechanism_code}")
        elif c.salted_password is None:
            if (c.user, mechanism) not in image.scram:
                outcome[c.user] = errors.ResourceNotFound(
                    f"{c.user} has no {mechanism} credential to delete")
        elif not MIN_ITERATIONS <= c.iterations <= MAX_ITERATIONS:
            outcome[c.user] = errors.UnacceptableCredential(
                f"iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}, "
                f"got {c.iterations}")
        elif not c.salt or not c.salted_password:
            outcome[c.user] = errors.UnacceptableCredential("salt and salted password are "
                                                            "required")
    records = []
    for c in changes:
        if outcome[c.user] is not None:
            continue
        mechanism = SCRAM_MECHANISMS[c.mechanism_code]
        if c.salted_password is None:
            records.append({"type": mrec.REMOVE_SCRAM_CREDENTIAL, "user": c.user,
                            "mechanism": mechanism})
        else:
            records.append(mrec.scram_record(c.user, mechanism, scram_credential(
                mechanism, c.salted_password, c.salt, c.iterations)))
    return records, outcome


def acl_creations(image: MetadataImage, bindings: Iterable[AclBinding]
                  ) -> list[dict[str, Any]]:
    """Records adding the bindings not there yet (creating an existing one is a no-op, as in
    Kafka)."""
    fresh = dict.fromkeys(b for b in bindings if b not in image.acls)
    return [mrec.acl_record(b) for b in fresh]


def acl_deletions(image: MetadataImage, filters: list[AclFilter]
                  ) -> tuple[list[dict[str, Any]], list[list[AclBinding]]]:
    """Records removing every binding a filter matches, and each filter's matches."""
    ordered = sorted(image.acls, key=lambda b: tuple(vars(b).values()))
    matches = [[b for b in ordered if f.matches(b)] for f in filters]
    gone = dict.fromkeys(b for found in matches for b in found)
    return [mrec.acl_record(b, remove=True) for b in gone], matches
