"""ACL bindings and SCRAM credentials through an AdminClient: what the operator's User
handler manages, with the requests `kafka-acls` and `kafka-configs` send.

The SCRAM upsert salts and hashes the password here, as Kafka's clients do (RFC 5802's
Hi() is PBKDF2 with the mechanism's HMAC), so the password itself never crosses the wire.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable

from ..protocol import errors
from ..defs.acl import ANY, CODES, AclBinding
from ..defs.sasl import SCRAM_CODES
from .admin import AdminClient
from .connection import raise_for

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
ACL_VERSION = 3
SCRAM_ITERATIONS = 4096
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def _binding_wire(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": CODES["resource"][b.resource_type],
            "resource_name": b.resource_name,
            "resource_pattern_type": CODES["pattern"][b.pattern_type],
            "principal": b.principal, "host": b.host,
            "operation": CODES["operation"][b.operation],
            "permission_type": CODES["permission"][b.permission]}


def _exact_filter(b: AclBinding) -> dict[str, Any]:
    w = _binding_wire(b)
    return {"resource_type_filter": w["resource_type"],
            "resource_name_filter": b.resource_name,
            "pattern_type_filter": w["resource_pattern_type"],
            "principal_filter": b.principal, "host_filter": b.host,
            "operation": w["operation"], "permission_type": w["permission_type"]}


async def describe_acls(admin: AdminClient, principal: str | None = None) -> set[AclBinding]:
    """Every binding (of `principal`, when given) the cluster holds."""
    resp = await admin.request(DESCRIBE_ACLS, ACL_VERSION, {
        "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
        "principal_filter": principal, "host_filter": None, "operation": ANY,
        "permission_type": ANY})
    raise_for(resp.error_code, "describe ACLs", resp.error_message)
    names = {kind: {code: name for name, code in table.items()}
             for kind, table in CODES.items()}
    return {AclBinding(names["resource"][int(r.resource_type)], r.resource_name,
                       names["pattern"][int(r.pattern_type)], a.principal, a.host,
                       names["operation"][int(a.operation)],
                       names["permission"][int(a.permission_type)])
            for r in resp.resources for a in r.acls}


async def create_acls(admin: AdminClient, bindings: Iterable[AclBinding]) -> None:
    creations = [_binding_wire(b) for b in bindings]
    if not creations:
        return
    resp = await admin.request(CREATE_ACLS, ACL_VERSION, {"creations": creations})
    for r in resp.results:
        raise_for(r.error_code, "create ACLs", r.error_message)


async def delete_acls(admin: AdminClient, bindings: Iterable[AclBinding]) -> int:
    """Deletes exactly these bindings; how many the cluster had."""
    filters = [_exact_filter(b) for b in bindings]
    if not filters:
        return 0
    resp = await admin.request(DELETE_ACLS, ACL_VERSION, {"filters": filters})
    for r in resp.filter_results:
        raise_for(r.error_code, "delete ACLs", r.error_message)
    return sum(len(r.matching_acls) for r in resp.filter_results)


def salted_password(password: str, salt: bytes, iterations: int, mechanism: str) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


async def upsert_scram(admin: AdminClient, user: str, password: str,
                       mechanism: str = "SCRAM-SHA-512",
                       iterations: int = SCRAM_ITERATIONS) -> None:
    salt = os.urandom(32)
    resp = await admin.request(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [{
        "name": user, "mechanism": SCRAM_CODES[mechanism], "iterations": iterations,
        "salt": salt, "salted_password": salted_password(password, salt, iterations,
                                                         mechanism)}]})
    for r in resp.results:
        raise_for(r.error_code, f"set SCRAM credentials of {user}", r.error_message)


async def delete_scram(admin: AdminClient, user: str, mechanism: str = "SCRAM-SHA-512"
                       ) -> bool:
    """False when the user had no such credential."""
    resp = await admin.request(ALTER_SCRAM, 0, {"upsertions": [], "deletions": [
        {"name": user, "mechanism": SCRAM_CODES[mechanism]}]})
    for r in resp.results:
        if r.error_code == errors.ResourceNotFound.code:
            return False
        raise_for(r.error_code, f"delete SCRAM credentials of {user}", r.error_message)
    return True


async def scram_mechanisms(admin: AdminClient, user: str) -> set[str]:
    """The SCRAM mechanisms `user` has credentials for (empty: none)."""
    resp = await admin.request(DESCRIBE_SCRAM, 0, {"users": [{"name": user}]})
    raise_for(resp.error_code, "describe SCRAM credentials", resp.error_message)
    mechanisms = {code: name for name, code in SCRAM_CODES.items()}
    found: set[str] = set()
    for r in resp.results:
        if r.error_code == errors.ResourceNotFound.code:
            continue
        raise_for(r.error_code, f"describe SCRAM credentials of {user}", r.error_message)
        found |= {mechanisms[int(c.mechanism)] for c in r.credential_infos}
    return found
