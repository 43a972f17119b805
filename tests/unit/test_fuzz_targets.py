"""The fuzz campaign's connection-leak probe on real sockets of this process."""
from __future__ import annotations

import os
import socket
import time
from types import SimpleNamespace

from tests.fuzz.targets import closed_by_peer


def _this_process() -> SimpleNamespace:
    return SimpleNamespace(proc=SimpleNamespace(pid=os.getpid()))


def _until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_connection_closed_by_its_client_and_kept_is_counted_until_closed() -> None:
    me = _this_process()
    before = closed_by_peer(me)
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        kept, _ = server.accept()
        assert closed_by_peer(me) == before
        client.close()  # the peer goes; `kept` is the server side a leaking broker would hold
        assert _until(lambda: closed_by_peer(me) == before + 1)
        kept.close()
        assert _until(lambda: closed_by_peer(me) == before)


def test_a_process_that_is_gone_holds_nothing() -> None:
    assert closed_by_peer(SimpleNamespace(proc=None)) == 0
