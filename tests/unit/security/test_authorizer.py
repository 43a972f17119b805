"""The broker's authorizer reads the current image's ACLs: a binding the metadata log adds
or removes is seen by the next check. Metadata's all-topics list and ListGroups filter
through the request's `authorized(..., quiet=True)`, so what is left out is not logged."""
from __future__ import annotations

import asyncio
import logging
import uuid
from types import SimpleNamespace

from rillet.apis import list_groups as list_groups_api
from rillet.apis import metadata as metadata_api
from rillet.apis.registry import RequestContext
from rillet.controller.security import acl_creations, acl_deletions
from rillet.metadata import records as mrec
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.view import MetadataView
from rillet.protocol.codec import RequestHeader, decode_response, encode_response
from rillet.defs.acl import AclBinding
from rillet.security.acl import filter_from_wire
from rillet.security.authorizer import Authorizer
from rillet.security.session import Session

CONFIG = {"super.users": "User:admin", "allow.everyone.if.no.acl.found": False}
ALICE = Session(principal="User:alice", client_host="10.0.0.1")


def acl(name, op, perm="ALLOW", principal="User:alice", rtype="TOPIC", pattern="LITERAL"):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


class FakeBroker:
    """What the authorizer and the two handlers read of a broker; `commit` replays records
    as the broker's metadata listener does (the image is replaced whole)."""

    def __init__(self, config=CONFIG) -> None:
        self.image = MetadataImage(cluster_id="c")
        self.cluster_id, self.node_id, self.metrics = "c", 1, None
        self.coordinator = SimpleNamespace(list_groups=lambda states: self.groups)
        self.groups: list = []
        self.authorizer = Authorizer(self, config)
        self.metadata = MetadataView(lambda: self.image)   # the Metadata handler's topic memo

    def commit(self, records) -> None:
        self.image = replay(self.image, records, self.image.offset + 1)


def test_an_acl_added_or_removed_through_the_metadata_log_is_seen_by_the_next_check():
    broker = FakeBroker()
    check = broker.authorizer.authorize
    assert not check(ALICE, "READ", "TOPIC", "orders")
    grant = acl("ord", "READ", pattern="PREFIXED")
    broker.commit(acl_creations(broker.image, [grant]))
    assert check(ALICE, "READ", "TOPIC", "orders") and check(ALICE, "DESCRIBE", "TOPIC", "ord")
    broker.commit(acl_creations(broker.image, [acl("orders", "ALL", "DENY")]))
    assert not check(ALICE, "DESCRIBE", "TOPIC", "orders")        # deny wins
    assert check(ALICE, "READ", "TOPIC", "ordinal")
    records, _ = acl_deletions(broker.image, [filter_from_wire(1, None, 1, None, None, 1, 2)])
    broker.commit(records)                                           # every DENY goes
    assert check(ALICE, "READ", "TOPIC", "orders")
    records, _ = acl_deletions(broker.image, [filter_from_wire(2, "orders", 2, None, None,
                                                               1, 1)])
    broker.commit(records)                                           # MATCH: the prefixed one
    assert broker.image.acls == set() and not check(ALICE, "READ", "TOPIC", "orders")
    assert check(Session(principal="User:admin"), "DELETE", "TOPIC", "orders")


def test_idempotent_write_needs_the_cluster_grant_or_a_topic_write():
    broker = FakeBroker({**CONFIG, "allow.everyone.if.no.acl.found": True})
    may = broker.authorizer.may_write_idempotently
    # The cluster has ACLs (bob's), so only the KIP-679 topic rule can let alice in: open
    # while no TOPIC ACL exists, whatever ACLs other resource types have.
    broker.commit(acl_creations(broker.image, [
        acl("kafka-cluster", "IDEMPOTENT_WRITE", principal="User:bob", rtype="CLUSTER"),
        acl("g", "READ", rtype="GROUP")]))
    assert may(ALICE)
    broker.commit(acl_creations(broker.image, [acl("logs", "WRITE", principal="User:carol")]))
    assert not may(ALICE) and may(Session(principal="User:carol"))
    assert may(Session(principal="User:bob"))
    broker.commit(acl_creations(broker.image, [acl("lo", "ALL", pattern="PREFIXED")]))
    assert may(ALICE)


def _ctx(broker, api_key: int, version: int) -> RequestContext:
    ctx = RequestContext(broker, RequestHeader(api_key, version, 1, "client"), "10.0.0.1:5",
                         1, "broker", ALICE)
    ctx.response = lambda data: data
    return ctx


def _metadata_topics(broker) -> list[str]:
    """The topic names of an all-topics Metadata v12 answer, as the client reads them."""
    ctx = RequestContext(broker, RequestHeader(3, 12, 1, "client"), "10.0.0.1:5", 1, "broker",
                         ALICE)
    answer = asyncio.run(metadata_api.metadata(ctx, SimpleNamespace(topics=None)))
    return [t.name for t in decode_response(3, 12, encode_response(3, 1, answer)[4:])[1].topics]


def _topic_records(*names: str) -> list[dict]:
    return [{"type": mrec.TOPIC, "name": n, "topic_id": str(uuid.uuid4())} for n in names]


def test_metadata_lists_only_the_topics_one_may_describe_without_logging_the_rest(caplog):
    broker = FakeBroker()
    broker.commit(_topic_records("orders", "payments", "secret"))
    broker.commit(acl_creations(broker.image, [acl("orders", "READ"),
                                               acl("pay", "DESCRIBE", pattern="PREFIXED")]))
    with caplog.at_level(logging.INFO, logger="rillet.authorizer"):
        names = _metadata_topics(broker)
    assert sorted(names) == ["orders", "payments"]
    assert not [r for r in caplog.records if r.name == "rillet.authorizer"]
    broker.authorizer = None                                         # no authorizer: all
    assert len(_metadata_topics(broker)) == 3


def test_list_groups_shows_the_groups_one_may_describe_or_all_with_cluster_describe(caplog):
    broker = FakeBroker()
    broker.groups = [SimpleNamespace(group_id=g, protocol_type="consumer", state="Stable")
                     for g in ("app-1", "app-2", "other")]
    broker.commit(acl_creations(broker.image, [acl("app-", "DESCRIBE", rtype="GROUP",
                                                   pattern="PREFIXED")]))

    def listed() -> list[str]:
        answer = asyncio.run(list_groups_api.list_groups(_ctx(broker, 16, 4),
                                                         SimpleNamespace(states_filter=())))
        return [g["group_id"] for g in answer["groups"]]

    with caplog.at_level(logging.INFO, logger="rillet.authorizer"):
        assert listed() == ["app-1", "app-2"]
    assert not [r for r in caplog.records if r.name == "rillet.authorizer"]
    broker.commit(acl_creations(broker.image, [acl("kafka-cluster", "DESCRIBE",
                                                   rtype="CLUSTER")]))
    assert listed() == ["app-1", "app-2", "other"]
    broker.authorizer = None
    assert listed() == ["app-1", "app-2", "other"]


def test_authorized_operations_are_the_allowed_bits_and_none_without_describe():
    from rillet.defs.acl import CODES
    broker = FakeBroker()
    ctx = _ctx(broker, 15, 5)
    bits = lambda *ops: sum(1 << CODES["operation"][op] for op in ops)  # noqa: E731
    assert ctx.authorized_operations("GROUP", "g1") == 0
    broker.commit(acl_creations(broker.image, [acl("g1", "READ", rtype="GROUP")]))
    assert ctx.authorized_operations("GROUP", "g1") == bits("READ", "DESCRIBE")
    broker.commit(acl_creations(broker.image, [acl("g1", "DESCRIBE", "DENY", rtype="GROUP")]))
    assert ctx.authorized_operations("GROUP", "g1") == 0      # no DESCRIBE: nothing shown
    admin = RequestContext(broker, RequestHeader(15, 5, 1, "client"), "10.0.0.1:5", 1,
                           "broker", Session(principal="User:admin"))
    assert admin.authorized_operations("TOPIC", "t") == bits(
        "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS")
