"""Envelope (58) is only taken from a principal allowed CLUSTER_ACTION: a peer that merely
reaches the controller listener cannot have a request judged as someone else's."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rillet.apis import envelope as envelope_api
from rillet.apis.registry import RequestContext
from rillet.protocol.codec import RequestHeader
from rillet.protocol.errors import ClusterAuthorizationFailed
from rillet.security.acl import AclIndex
from rillet.security.authorizer import Authorizer
from rillet.security.session import Session

CONFIG = {"super.users": "User:broker", "allow.everyone.if.no.acl.found": False}


def _answer(principal: str) -> tuple[object, list]:
    dispatched: list = []

    async def fake_dispatch(*args, **kwargs):
        dispatched.append(kwargs or args)
        return b"\0\0\0\4inner"

    broker = SimpleNamespace(image=SimpleNamespace(acls=AclIndex()), metrics=None)
    broker.authorizer = Authorizer(broker, CONFIG)
    ctx = RequestContext(broker, RequestHeader(58, 0, 1, "peer"), "127.0.0.1:1", 1,
                         "controller", Session(principal=principal), redispatch=fake_dispatch)
    ctx.response = lambda data: data
    req = SimpleNamespace(request_data=b"frame", request_principal=b"User:admin",
                          client_host_address=b"127.0.0.1")
    return asyncio.run(envelope_api.envelope(ctx, req)), dispatched


def test_an_envelope_from_a_principal_without_cluster_action_is_refused():
    answer, dispatched = _answer("User:mallory")
    assert answer["error_code"] == ClusterAuthorizationFailed.code
    assert answer["response_data"] is None and dispatched == []


def test_an_envelope_from_a_broker_principal_is_handled():
    answer, dispatched = _answer("User:broker")
    assert answer == {"response_data": b"inner", "error_code": 0} and len(dispatched) == 1
