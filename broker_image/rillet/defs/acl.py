"""ACL names and the binding type, as Kafka has them: the wire codes of resource types,
pattern types, operations and permissions, and `AclBinding` (one rule).

Shared: the broker stores and decides over bindings (security/acl.py, the metadata image), the
client sends them (rillet.client.security) and the operator computes a User's from its spec.
"""
from __future__ import annotations

from dataclasses import dataclass

# Kafka's wire codes (ResourceType, PatternType, AclOperation, AclPermissionType).
RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS",
              11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS",
              14: "DESCRIBE_TOKENS"}
PERMISSIONS = {2: "DENY", 3: "ALLOW"}
ANY, MATCH = 1, 2      # filter-only codes: any type/operation/permission; MATCH patterns
CODES = {kind: {name: code for code, name in table.items()}
         for kind, table in (("resource", RESOURCE_TYPES), ("pattern", PATTERN_TYPES),
                             ("operation", OPERATIONS), ("permission", PERMISSIONS))}
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who may (or may not) do what on which resources, from which host."""
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def matches_resource(self, resource_type: str, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == "PREFIXED":
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, "User:*") and self.host in (host, WILDCARD)
