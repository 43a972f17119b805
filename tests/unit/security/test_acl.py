"""The StandardAuthorizer decision (pure), its index over an image's bindings, and the
controller's ACL and SCRAM records."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.controller.security import ScramChange, acl_creations, acl_deletions, scram_changes
from rillet.metadata import records as mrec
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import image_records
from rillet.protocol import errors
from rillet.defs.acl import OPERATIONS, AclBinding
from rillet.security.acl import AclIndex, InvalidAcl, allowed, binding_from_wire, filter_from_wire


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


# The index must select exactly what the linear scan selects. Names come from a tiny
# alphabet that holds the wildcard, so literals, `*`, and prefixes of every length
# (the empty one, the whole name, longer than the name) collide often.
_NAMES = st.text(alphabet="ab*", max_size=3)
_PRINCIPALS = ["User:alice", "User:bob", "User:*"]
_HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
_bindings = st.builds(AclBinding, st.sampled_from(["TOPIC", "GROUP"]), _NAMES,
                      st.sampled_from(["LITERAL", "PREFIXED"]), st.sampled_from(_PRINCIPALS),
                      st.sampled_from(_HOSTS), st.sampled_from(sorted(OPERATIONS.values())),
                      st.sampled_from(["ALLOW", "DENY"]))


def _key(b):
    return tuple(vars(b).values())


@settings(max_examples=300, deadline=None)
@given(data=st.data(), bindings=st.lists(_bindings, max_size=25),
       rtype=st.sampled_from(["TOPIC", "GROUP"]),
       principal=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
       host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
       operation=st.sampled_from(sorted(OPERATIONS.values())),
       super_user=st.booleans(), allow_if_no_acl=st.booleans())
def test_the_index_answers_as_the_linear_scan(data, bindings, rtype, principal, host,
                                               operation, super_user, allow_if_no_acl):
    # Half the time a name some binding carries (`*` included), so hits are common.
    names = sorted({b.resource_name for b in bindings})
    name = data.draw(st.sampled_from(names) if names and data.draw(st.booleans())
                     else _NAMES)
    index = AclIndex(bindings)
    scanned = [b for b in set(bindings) if b.matches_resource(rtype, name)]
    found = index.matching(rtype, name)
    assert sorted(found, key=_key) == sorted(scanned, key=_key)   # each binding once
    assert sorted(index.of_type(rtype), key=_key) == sorted(
        (b for b in set(bindings) if b.resource_type == rtype), key=_key)
    supers = frozenset({principal}) if super_user else frozenset()
    assert index.allowed(principal, host, operation, rtype, name, super_users=supers,
                         allow_if_no_acl=allow_if_no_acl) == allowed(
        bindings, principal, host, operation, rtype, name, super_users=supers,
        allow_if_no_acl=allow_if_no_acl)


def test_index_literal_wildcard_and_prefixes():
    star, exact = acl("*", "READ"), acl("pay", "WRITE")
    short, whole = acl("p", "READ", pattern="PREFIXED"), acl("pay", "READ", pattern="PREFIXED")
    group = acl("pay", "READ", rtype="GROUP")
    index = AclIndex([star, exact, short, whole, group])
    assert index == {star, exact, short, whole, group}       # still the set of bindings
    assert set(index.matching("TOPIC", "pay")) == {star, exact, short, whole}
    assert set(index.matching("TOPIC", "pa")) == {star, short}   # a prefix longer than the name
    assert index.matching("TOPIC", "*") == [star]                # `*` named literally, once
    assert set(index.matching("GROUP", "payments")) == set()     # types are apart
    assert set(index.matching("GROUP", "pay")) == {group}
    assert AclIndex().matching("TOPIC", "pay") == [] and AclIndex().of_type("TOPIC") == ()


def test_the_image_builds_its_index_once_per_acl_change():
    a = acl("orders", "READ")
    image = _image_with(acl_creations(MetadataImage(cluster_id="c"), [a]))
    assert isinstance(image.acls, AclIndex) and image.acls.matching("TOPIC", "orders") == [a]
    # A batch without ACL records keeps the very index; one with them builds a new one.
    later = replay(image, [{"type": mrec.PRODUCER_IDS, "next_producer_id": 1000}], 1)
    assert later.acls is image.acls
    b = acl("orders", "WRITE", "DENY")
    changed = replay(later, acl_creations(later, [b]), 2)
    assert changed.acls is not later.acls and set(changed.acls.matching("TOPIC", "orders")) \
        == {a, b}
    records, _ = acl_deletions(changed, [filter_from_wire(2, "orders", 3, None, None, 4, 2)])
    assert replay(changed, records, 3).acls.matching("TOPIC", "orders") == [a]
