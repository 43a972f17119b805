"""ACL bindings and the decision Kafka's StandardAuthorizer makes from them. Pure logic.
(The binding type and the wire codes are defs/acl.py's, shared with the client and operator.)

A binding allows or denies one principal (or `User:*`) from one host (or `*`) one
operation (or ALL) on resources of one type named literally (or `*`) or by prefix. A
request is allowed when the principal is a super user; otherwise it is denied if any
matching binding denies it, allowed if a matching one allows it (READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS), and when no binding at all
names the resource, allowed only with allow.everyone.if.no.acl.found.

`allowed` decides over any collection of bindings by scanning it; `AclIndex` is the
metadata image's set of bindings, indexed by resource so that one decision looks only at
the bindings that can match (the same answer, without a scan per topic of a request).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..defs.acl import (ANY, CLUSTER_NAME, MATCH, OPERATIONS, PATTERN_TYPES, PERMISSIONS,
                        RESOURCE_TYPES, WILDCARD, AclBinding)

_IMPLIES = {"DESCRIBE": {"READ", "WRITE", "DELETE", "ALTER"},
            "DESCRIBE_CONFIGS": {"ALTER_CONFIGS"}}


class InvalidAcl(ValueError):
    pass


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None (ANY) matches every value; pattern
    MATCH selects the bindings that would apply to the named resource."""
    resource_type: str | None
    resource_name: str | None
    pattern_type: str | None    # None = ANY, "MATCH", "LITERAL", "PREFIXED"
    principal: str | None
    host: str | None
    operation: str | None
    permission: str | None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type is not None and b.resource_type != self.resource_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type == "MATCH":
                if not b.matches_resource(b.resource_type, self.resource_name):
                    return False
            elif b.resource_name != self.resource_name:
                return False
        if self.pattern_type not in (None, "MATCH") and b.pattern_type != self.pattern_type:
            return False
        return all(want is None or want == have for want, have in (
            (self.principal, b.principal), (self.host, b.host),
            (self.operation, b.operation), (self.permission, b.permission)))


def _name(table: dict[int, str], code: int, what: str) -> str:
    try:
        return table[code]
    except KeyError:
        raise InvalidAcl(f"unknown {what} code {code}") from None


def binding_from_wire(resource_type: int, resource_name: str, pattern_type: int,
                      principal: str, host: str, operation: int,
                      permission: int) -> AclBinding:
    """A binding CreateAcls may store; InvalidAcl says what is wrong with it."""
    if not principal or ":" not in principal:
        raise InvalidAcl(f"principal {principal!r} is not TYPE:NAME (User:alice)")
    if not resource_name:
        raise InvalidAcl("the resource name is empty")
    rtype = _name(RESOURCE_TYPES, resource_type, "resource type")
    if rtype == "CLUSTER" and resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME}")
    return AclBinding(rtype, resource_name, _name(PATTERN_TYPES, pattern_type, "pattern type"),
                      principal, host or WILDCARD,
                      _name(OPERATIONS, operation, "operation"),
                      _name(PERMISSIONS, permission, "permission"))


def filter_from_wire(resource_type: int, resource_name: str | None, pattern_type: int,
                     principal: str | None, host: str | None, operation: int,
                     permission: int) -> AclFilter:
    def opt(table: dict[int, str], code: int, what: str) -> str | None:
        return None if code == ANY else _name(table, code, what)
    pattern = None if pattern_type == ANY else "MATCH" if pattern_type == MATCH else \
        _name(PATTERN_TYPES, pattern_type, "pattern type")
    return AclFilter(opt(RESOURCE_TYPES, resource_type, "resource type"), resource_name,
                     pattern, principal, host, opt(OPERATIONS, operation, "operation"),
                     opt(PERMISSIONS, permission, "permission"))


def parse_super_users(text: str) -> frozenset[str]:
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def allowed(acls: Iterable[AclBinding], principal: str, host: str, operation: str,
            resource_type: str, name: str, *, super_users: frozenset[str] = frozenset(),
            allow_if_no_acl: bool = False) -> bool:
    if principal in super_users:
        return True
    return _decide([b for b in acls if b.matches_resource(resource_type, name)],
                   principal, host, operation, allow_if_no_acl)


def _decide(relevant: Sequence[AclBinding], principal: str, host: str, operation: str,
            allow_if_no_acl: bool) -> bool:
    """The decision from the bindings naming the resource (any principal, any host)."""
    if not relevant:
        return allow_if_no_acl
    mine = [b for b in relevant if b.applies_to(principal, host)]
    if any(b.permission == "DENY" and b.operation in (operation, "ALL") for b in mine):
        return False
    granting = {operation, "ALL"} | _IMPLIES.get(operation, set())
    return any(b.permission == "ALLOW" and b.operation in granting for b in mine)


class AclIndex(frozenset[AclBinding]):
    """The ACL bindings of one metadata image: a frozenset, indexed by resource.

    LITERAL bindings are found by (resource type, name), the wildcard `*` among them;
    PREFIXED ones by resource type, then by each prefix length in use, so one lookup costs
    the bindings that can match plus one dict probe per distinct prefix length. Built once
    per change of the image's ACLs (`metadata/image.py` keeps the same object while a
    batch leaves them alone); immutable, so any reader may share it without a lock.
    """
    __slots__ = ("_literal", "_prefixed", "_prefix_lengths", "_by_type")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        super().__init__()
        literal: dict[tuple[str, str], list[AclBinding]] = {}
        prefixed: dict[tuple[str, str], list[AclBinding]] = {}
        by_type: dict[str, list[AclBinding]] = {}
        for b in self:
            by_name = prefixed if b.pattern_type == "PREFIXED" else literal
            by_name.setdefault((b.resource_type, b.resource_name), []).append(b)
            by_type.setdefault(b.resource_type, []).append(b)
        lengths: dict[str, set[int]] = {}
        for rtype, prefix in prefixed:
            lengths.setdefault(rtype, set()).add(len(prefix))
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {t: tuple(sorted(n)) for t, n in lengths.items()}
        self._by_type = {t: tuple(v) for t, v in by_type.items()}

    def matching(self, resource_type: str, name: str) -> list[AclBinding]:
        """The bindings naming the resource: what `AclBinding.matches_resource` selects."""
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            out += self._prefixed.get((resource_type, name[:length]), ())
        return out

    def of_type(self, resource_type: str) -> tuple[AclBinding, ...]:
        """Every binding on resources of one type."""
        return self._by_type.get(resource_type, ())

    def allowed(self, principal: str, host: str, operation: str, resource_type: str,
                name: str, *, super_users: frozenset[str] = frozenset(),
                allow_if_no_acl: bool = False) -> bool:
        """`allowed(self, ...)`, from the index."""
        if principal in super_users:
            return True
        return _decide(self.matching(resource_type, name), principal, host, operation,
                       allow_if_no_acl)
