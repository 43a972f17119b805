"""When a node that relayed a metadata change may answer (ApiSpec.settled): pure checks on
plain stand-ins for this node's image and the decoded request and response."""
from __future__ import annotations

from types import SimpleNamespace as NS

from rillet.apis import load_all
from rillet.security.acl import binding_from_wire

REGISTRY = load_all()
TOPIC, LITERAL, READ, DENY = 2, 3, 3, 2


def _image(topics: set[str] = frozenset(), acls: set = frozenset()) -> NS:
    return NS(topics={t: object() for t in topics}, acls=set(acls))


def _creation(name: str) -> NS:
    return NS(resource_type=TOPIC, resource_name=name, resource_pattern_type=LITERAL,
              principal="User:bob", host="*", operation=READ, permission_type=DENY)


def test_every_forwarded_metadata_change_api_says_when_it_is_settled() -> None:
    assert {k for k, s in REGISTRY.items() if s.settled is not None} == {19, 20, 30, 31, 49}
    assert all(REGISTRY[k].forward for k in (19, 20, 30, 31, 49))


def test_create_topics_waits_for_created_topics_only() -> None:
    settled = REGISTRY[19].settled
    req = NS(validate_only=False)
    resp = NS(topics=[NS(name="new", error_code=0), NS(name="taken", error_code=36)])
    assert not settled(_image(), req, resp)
    assert settled(_image({"new"}), req, resp)
    assert settled(_image(), NS(validate_only=True), resp)


def test_delete_topics_waits_until_the_topic_is_gone_here() -> None:
    settled = REGISTRY[20].settled
    resp = NS(responses=[NS(name="old", error_code=0), NS(name="kept", error_code=3)])
    assert not settled(_image({"old", "kept"}), NS(), resp)
    assert settled(_image({"kept"}), NS(), resp)


def test_create_acls_waits_for_the_binding_this_node_enforces() -> None:
    settled = REGISTRY[30].settled
    req = NS(creations=[_creation("t"), _creation("refused")])
    resp = NS(results=[NS(error_code=0), NS(error_code=42)])
    binding = binding_from_wire(TOPIC, "t", LITERAL, "User:bob", "*", READ, DENY)
    assert not settled(_image(), req, resp)
    assert settled(_image(acls={binding}), req, resp)


def test_delete_acls_waits_until_the_matched_binding_is_gone_here() -> None:
    settled = REGISTRY[31].settled
    binding = binding_from_wire(TOPIC, "t", LITERAL, "User:bob", "*", READ, DENY)
    matched = NS(resource_type=TOPIC, resource_name="t", pattern_type=LITERAL,
                 principal="User:bob", host="*", operation=READ, permission_type=DENY)
    resp = NS(filter_results=[NS(matching_acls=[matched])])
    assert not settled(_image(acls={binding}), NS(), resp)
    assert settled(_image(), NS(), resp)


def test_alter_client_quotas_waits_until_this_node_holds_the_values() -> None:
    settled = REGISTRY[49].settled
    entity = [NS(entity_type="user", entity_name="alice")]
    req = NS(validate_only=False, entries=[
        NS(entity=entity, ops=[NS(key="producer_byte_rate", value=10.0, remove=False),
                               NS(key="request_percentage", value=0.0, remove=True)]),
        NS(entity=[NS(entity_type="client-id", entity_name=None)],
           ops=[NS(key="bogus", value=1.0, remove=False)])])
    resp = NS(entries=[NS(error_code=0), NS(error_code=42)])
    key = (("user", "alice"),)

    def image(values: dict) -> NS:
        return NS(client_quotas={key: values} if values else {})
    assert not settled(image({}), req, resp)
    assert not settled(image({"producer_byte_rate": 10.0, "request_percentage": 5.0}), req,
                       resp)
    assert settled(image({"producer_byte_rate": 10.0}), req, resp)
    assert settled(image({}), NS(validate_only=True, entries=req.entries), resp)
