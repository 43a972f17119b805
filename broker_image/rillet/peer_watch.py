"""A long poll ends when its client has gone.

A connection answers its requests one at a time and reads nothing while one is in progress
(server.py), so a client that hangs up in the middle of a long poll (a Fetch whose
max_wait_ms it chose, up to 24 days) would leave the connection open on this side, its
socket in CLOSE_WAIT, until that wait ends. Kafka behaves so too (it notices when it writes
the answer); a fuzz campaign of a million frames showed such connections piling up.

`PeerWatch` sits in front of a connection's stream protocol and passes every event through;
it notes the peer's EOF or the connection's loss. A wait that only waits (no state changes
under it: the long polls of fetch.py and the quorum's Fetch) runs inside `peer_may_end()`;
if the peer goes meanwhile, the connection's task is cancelled there and the block raises
`PeerGone`, a ConnectionError, which closes the connection as any lost one is. Cancelling
anywhere else could cut a request half done, so nothing else is cancelled.

Kafka clients never half-close a connection to wait for an answer, so an EOF counts as gone.

It also notes when the peer last sent bytes: the idle sweep (server.py) counts a request still
arriving as activity, as Kafka's selector counts every read.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_CURRENT: ContextVar["PeerWatch | None"] = ContextVar("rillet_peer_watch", default=None)


class PeerGone(ConnectionError):
    """The client closed the connection while its request waited."""


class PeerWatch(asyncio.Protocol):
    """In front of one connection's protocol, for the task that serves the connection."""

    def __init__(self, inner: asyncio.BaseProtocol, task: asyncio.Task[None]) -> None:
        self._inner = inner
        self._task = task
        self.gone = False
        self._waiting = False   # the task is inside peer_may_end(): it may be cancelled
        self._cancelled = False  # by _peer_left, not yet seen by _may_end
        self.last_read = time.monotonic()   # when bytes last came in

    @classmethod
    def install(cls, writer: asyncio.StreamWriter) -> PeerWatch:
        """Watch `writer`'s connection for the task running now (the connection's own), as
        the watch of every `peer_may_end()` block that task enters."""
        task = asyncio.current_task()
        assert task is not None
        transport = writer.transport
        watch = cls(transport.get_protocol(), task)
        transport.set_protocol(watch)
        _CURRENT.set(watch)
        return watch

    # -- the protocol, passed through --------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        self._inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        self._peer_left()
        return self._inner.eof_received()  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self._peer_left()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def _peer_left(self) -> None:
        if not self.gone:
            self.gone = True
            if self._waiting:
                # The task is suspended inside the block (this runs between its steps), so
                # the CancelledError is thrown in there, where _may_end turns it into PeerGone.
                self._cancelled = self._task.cancel()

    # -- the waits ----------------------------------------------------------------------------

    def watches_current_task(self) -> bool:
        """The task running now is the connection's own (only it may be cancelled here)."""
        return asyncio.current_task() is self._task

    @contextmanager
    def may_end(self) -> Iterator[None]:
        """In the connection's own task: its peer leaving ends the block with PeerGone."""
        if self.gone:
            raise PeerGone("the client closed the connection")
        self._waiting = True
        try:
            yield
        except asyncio.CancelledError:
            if not self._cancelled:
                raise           # cancelled by someone else (shutdown): theirs
            self._cancelled = False
            self._task.uncancel()
            raise PeerGone("the client closed the connection while its request waited") \
                from None
        finally:
            self._waiting = False
            if self._cancelled:
                # Python 3.11's wait_for can swallow a cancellation that meets a result:
                # balance the count, so later asyncio.timeout blocks read it right.
                self._cancelled = False
                self._task.uncancel()


@contextmanager
def peer_may_end() -> Iterator[None]:
    """Around a wait that changes nothing: the client leaving ends it with PeerGone. Outside
    a watched connection's own task (a background task, a test), it only waits."""
    watch = _CURRENT.get()
    if watch is None or not watch.watches_current_task():
        yield
        return
    with watch.may_end():
        yield
