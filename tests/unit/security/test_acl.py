"""The StandardAuthorizer decision (pure) and the controller's ACL and SCRAM records."""
from __future__ import annotations

import pytest

from rillet.controller.security import ScramChange, acl_creations, acl_deletions, scram_changes
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import image_records
from rillet.protocol import errors
from rillet.security.acl import AclBinding, InvalidAcl, allowed, binding_from_wire, \
    filter_from_wire


def acl(name, op, perm="ALLOW", principal="User:alice", rtype="TOPIC", pattern="LITERAL",
        host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def check(acls, op, name, principal="User:alice", rtype="TOPIC", host="10.0.0.1", **kw):
    return allowed(acls, principal, host, op, rtype, name, **kw)


def test_allow_deny_and_precedence():
    acls = [acl("orders", "WRITE"), acl("orders", "WRITE", "DENY", principal="User:bob"),
            acl("orders", "ALL", principal="User:bob")]
    assert check(acls, "WRITE", "orders")
    assert not check(acls, "READ", "orders")               # only WRITE was granted
    assert not check(acls, "WRITE", "orders", "User:bob")  # DENY beats ALLOW (even ALL)
    assert check(acls, "READ", "orders", "User:bob")
    assert not check(acls, "WRITE", "orders", "User:carol")


def test_implied_operations():
    acls = [acl("orders", "READ"), acl("orders", "ALTER_CONFIGS", principal="User:ops")]
    assert check(acls, "DESCRIBE", "orders")
    assert check(acls, "DESCRIBE_CONFIGS", "orders", "User:ops")
    assert not check(acls, "DESCRIBE", "orders", "User:ops")
    # A DENY READ does not deny DESCRIBE (only an explicit or ALL deny does).
    acls.append(acl("orders", "READ", "DENY", principal="User:eve"))
    acls.append(acl("orders", "DESCRIBE", principal="User:eve"))
    assert check(acls, "DESCRIBE", "orders", "User:eve")
    assert not check(acls, "READ", "orders", "User:eve")


def test_prefixed_wildcard_principal_and_host():
    acls = [acl("pay-", "READ", pattern="PREFIXED"), acl("*", "DESCRIBE", principal="User:*"),
            acl("audit", "READ", principal="User:bob", host="10.0.0.9")]
    assert check(acls, "READ", "pay-ments") and not check(acls, "READ", "paym")
    assert check(acls, "DESCRIBE", "anything", "User:zed")
    assert check(acls, "READ", "audit", "User:bob", host="10.0.0.9")
    assert not check(acls, "READ", "audit", "User:bob", host="10.0.0.8")


def test_super_users_and_resources_without_acls():
    acls = [acl("orders", "READ")]
    assert check(acls, "DELETE", "orders", "User:admin", super_users=frozenset({"User:admin"}))
    assert not check(acls, "READ", "free")
    assert check(acls, "READ", "free", allow_if_no_acl=True)
    # A resource with ACLs (for someone else) is not open, even with allow-if-no-acl.
    assert not check(acls, "READ", "orders", "User:bob", allow_if_no_acl=True)


def test_wire_validation():
    with pytest.raises(InvalidAcl, match="principal"):
        binding_from_wire(2, "t", 3, "alice", "*", 3, 3)
    with pytest.raises(InvalidAcl, match="kafka-cluster"):
        binding_from_wire(4, "my-cluster", 3, "User:a", "*", 7, 3)
    with pytest.raises(InvalidAcl, match="operation"):
        binding_from_wire(2, "t", 3, "User:a", "*", 1, 3)   # ANY is for filters only
    assert binding_from_wire(2, "t", 4, "User:a", "", 3, 3).host == "*"


def _image_with(records):
    return replay(MetadataImage(cluster_id="c"), records, 0)


def test_acl_records_create_once_delete_by_filter_and_survive_a_snapshot():
    a, b = acl("orders", "READ"), acl("pay-", "WRITE", pattern="PREFIXED", principal="User:bob")
    image = _image_with(acl_creations(MetadataImage(cluster_id="c"), [a, b, a]))
    assert image.acls == {a, b}
    assert acl_creations(image, [a]) == []        # an existing binding is not re-added
    rebuilt = replay(MetadataImage(cluster_id="c"), image_records(image), 5)
    assert rebuilt.acls == image.acls
    # MATCH: the bindings that apply to topic pay-ments (the prefixed one).
    match = filter_from_wire(2, "pay-ments", 2, None, None, 1, 1)
    records, matches = acl_deletions(image, [match, filter_from_wire(1, None, 1, "User:nobody",
                                                                      None, 1, 1)])
    assert matches == [[b], []]
    assert replay(image, records, 6).acls == {a}


def test_scram_changes_validate_like_kafka_and_store_no_password():
    image = MetadataImage(cluster_id="c")
    records, outcome = scram_changes(image, [
        ScramChange("alice", 2, 8192, b"salt", b"x" * 64),
        ScramChange("bob", 2, 100, b"salt", b"x" * 64),
        ScramChange("carol", 9, 8192, b"salt", b"x" * 64),
        ScramChange("dave", 1),                                    # delete what is not there
        ScramChange("erin", 1, 4096, b"s", b"y" * 32), ScramChange("erin", 1, 4096, b"s", b"y" * 32),
    ])
    assert outcome["alice"] is None
    assert isinstance(outcome["bob"], errors.UnacceptableCredential)
    assert isinstance(outcome["carol"], errors.UnsupportedSaslMechanism)
    assert isinstance(outcome["dave"], errors.ResourceNotFound)
    assert isinstance(outcome["erin"], errors.DuplicateResource)
    assert [r["user"] for r in records] == ["alice"]
    assert "x" * 8 not in str(records)
    image = _image_with(records)
    assert image.scram[("alice", "SCRAM-SHA-512")].iterations == 8192
    assert replay(MetadataImage(cluster_id="c"), image_records(image), 3).scram == image.scram
    records, outcome = scram_changes(image, [ScramChange("alice", 2)])
    assert outcome == {"alice": None} and replay(image, records, 4).scram == {}
