"""The admin endpoint's protocol side: request heads in, responses out (no sockets)."""
from __future__ import annotations

import json

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from rillet.admin_http import (BadRequest, HttpRequest, HttpResponse, parse_request_head,
                               respond)
from rillet.readiness import Readiness


class Endpoints:
    def __init__(self, ready: Readiness) -> None:
        self.ready = ready

    def readiness(self) -> Readiness:
        return self.ready

    def metrics(self) -> bytes:
        return b"rillet_up 1\n"


def test_parses_a_probe_and_a_scrape():
    assert parse_request_head(b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: kube-probe/1.30"
                              b"\r\n\r\n") == HttpRequest("GET", "/healthz")
    # Prometheus adds a query string in some set-ups; the path is what routes.
    assert parse_request_head(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n") == HttpRequest(
        "GET", "/metrics")


@pytest.mark.parametrize("head", [
    b"\x00\xff garbage\r\n\r\n",
    b"GET /healthz\r\n\r\n",                       # HTTP/0.9 style, no version
    b"GET /healthz HTTP/2.0\r\n\r\n",
    b"GET healthz HTTP/1.1\r\n\r\n",               # not origin-form
    b"G\x01T /healthz HTTP/1.1\r\n\r\n",
    b"GET /a b HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n: empty name\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n",                  # no blank line
])
def test_malformed_heads_are_refused(head: bytes):
    with pytest.raises(BadRequest):
        parse_request_head(head)


def test_routes():
    ready = Endpoints(Readiness(True))
    health = respond(HttpRequest("GET", "/healthz"), ready)
    assert (health.status, health.body) == (200, b"ok")
    r = respond(HttpRequest("GET", "/readyz"), ready)
    assert r.status == 200 and json.loads(r.body) == {"ready": True}
    m = respond(HttpRequest("GET", "/metrics"), ready)
    assert (m.status, m.body, m.content_type) == (200, b"rillet_up 1\n", CONTENT_TYPE_LATEST)
    assert respond(HttpRequest("GET", "/"), ready).status == 404
    assert respond(HttpRequest("GET", "/metrics/x"), ready).status == 404
    for method in ("POST", "PUT", "DELETE", "HEAD"):
        refused = respond(HttpRequest(method, "/readyz"), ready)
        assert refused.status == 405 and ("Allow", "GET") in refused.headers


def test_not_ready_is_503_with_the_reason():
    r = respond(HttpRequest("GET", "/readyz"), Endpoints(Readiness(False, "fenced")))
    assert r.status == 503 and r.content_type == "application/json"
    assert json.loads(r.body) == {"ready": False, "reason": "fenced"}


def test_response_bytes():
    raw = HttpResponse(405, b"no\n", headers=(("Allow", "GET"),)).encode()
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 405 Method Not Allowed"
    assert {"Content-Length: 3", "Connection: close", "Allow: GET"} <= set(lines[1:])
    assert body == b"no\n"
