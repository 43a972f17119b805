"""The ACL authorizer of one broker: security/acl.py's decision on the current metadata image.

On when authorizer.class.name names Kafka's StandardAuthorizer (or AclAuthorizer): every
API then checks its resources for the request's principal. A check reads the image's
`AclIndex`, so it costs the bindings naming the resource, not every ACL of the cluster.
Denials are logged at INFO (principal, host, operation, resource), as Kafka's authorizer
logger does, except for the quiet checks that only filter what a client sees (Metadata's
topic list, ListGroups' groups).
"""
from __future__ import annotations

import logging
from typing import Any, Protocol

from ..metadata.view import ImageSource
from ..defs.acl import CLUSTER_NAME
from .acl import parse_super_users
from .session import Session

log = logging.getLogger("rillet.authorizer")


class DenialCounter(Protocol):
    """Where denials are counted (the broker's metrics)."""

    def authorization_denied(self, resource_type: str, operation: str) -> None: ...


class Authorizer:
    def __init__(self, metadata: ImageSource, config: Any,
                 denials: DenialCounter | None = None) -> None:
        self.metadata = metadata
        self.denials = denials
        self.super_users = parse_super_users(config["super.users"])
        self.allow_if_no_acl = bool(config["allow.everyone.if.no.acl.found"])

    @classmethod
    def from_config(cls, metadata: ImageSource, config: Any,
                    denials: DenialCounter | None = None) -> "Authorizer | None":
        return cls(metadata, config, denials) if config["authorizer.class.name"] else None

    def may_write_idempotently(self, session: Session) -> bool:
        """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or
        (KIP-679) WRITE allowed on some topic."""
        if self.authorize(session, "IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_NAME, quiet=True):
            return True
        topic_acls = self.metadata.image.acls.of_type("TOPIC")
        if self.allow_if_no_acl and not topic_acls:
            return True
        if any(b.permission == "ALLOW" and b.operation in ("WRITE", "ALL")
               and b.applies_to(session.principal, session.client_host)
               and self.authorize(session, "WRITE", "TOPIC", b.resource_name, quiet=True)
               for b in topic_acls):
            return True
        self._denied(session, "IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_NAME)
        return False

    def authorize(self, session: Session, operation: str, resource_type: str, name: str,
                  *, quiet: bool = False) -> bool:
        ok = self.metadata.image.acls.allowed(
            session.principal, session.client_host, operation, resource_type, name,
            super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)
        if not ok and not quiet:
            self._denied(session, operation, resource_type, name)
        return ok

    def _denied(self, session: Session, operation: str, resource_type: str,
                name: str) -> None:
        log.info("denied: principal=%s host=%s operation=%s resource=%s:%s (listener %s)",
                 session.principal, session.client_host, operation, resource_type, name,
                 session.listener_name)
        if self.denials is not None:
            self.denials.authorization_denied(resource_type, operation)
