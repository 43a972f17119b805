"""One connection to one broker: framed requests, responses matched by correlation id.

Requests on a connection are serialized by a lock (one in flight): the
admin client sends few, small requests, and this keeps the reader simple.
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any

from ..protocol.build import build
from ..protocol.codec import (FramingError, decode_response, encode_request, request_schema,
                              response_size)
from ..protocol.errors import KafkaError, error_for_code


# The address every connection this process opens binds to as its source; None lets the OS
# choose (the default). A broker sets it once at start-up (outbound.source.address) before it
# opens any connection; it is process-wide because every outbound path of a node (quorum,
# replication, forwarding, registration) must leave from the same address.
_source_host: str | None = None


def set_source_host(host: str | None) -> None:
    """Bind every connection opened from now on to `host` (None or "": the OS's choice)."""
    global _source_host
    _source_host = host or None


class KafkaClientError(Exception):
    """A request failed on the wire (connection lost, timeout, bad response)."""


def raise_for(code: Any, what: str, message: str | None = None) -> None:
    """Raise the rillet KafkaError class of a non-zero error code.

    ``message``: the response's error_message, kept in the exception because it often
    says why (e.g. which partitions a broker still holds)."""
    value = int(getattr(code, "value", code))
    if value:
        cls = error_for_code(value)
        reason = f": {message}" if message else ""
        err: KafkaError = cls(f"{what}: error {value} ({cls.__name__}){reason}")
        err.code = value
        raise err


async def open_stream(host: str, port: int, ssl_context: ssl.SSLContext | None = None
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a listener, TLS when `ssl_context` is given (the host name checked
    against the certificate, as the context says), from the source address set by
    set_source_host."""
    local = (_source_host, 0) if _source_host else None
    if ssl_context is None:
        return await asyncio.open_connection(host, port, local_addr=local)
    return await asyncio.open_connection(host, port, ssl=ssl_context, server_hostname=host,
                                         local_addr=local)


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "rillet-admin",
                 timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.client_id = client_id
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._correlation = 0

    async def connect(self) -> "BrokerConnection":
        if self._writer is None:
            self._reader, self._writer = await asyncio.wait_for(
                open_stream(self.host, self.port, self.ssl_context), self.timeout)
        return self

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request built from plain values; return the decoded response body."""
        entity = build(request_schema(api_key, version), body)
        async with self._lock:
            await self.connect()
            assert self._reader is not None and self._writer is not None
            self._correlation += 1
            correlation = self._correlation
            self._writer.write(encode_request(api_key, version, correlation, self.client_id,
                                              entity))
            try:
                await self._writer.drain()
                size_bytes = await asyncio.wait_for(self._reader.readexactly(4), self.timeout)
                size = response_size(size_bytes)
                frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout)
                got, response = decode_response(api_key, version, frame)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                    FramingError) as exc:
                await self.close()
                raise KafkaClientError(f"{self.host}:{self.port}: {exc!r}") from exc
            if got != correlation:
                await self.close()
                raise KafkaClientError(f"correlation id {got} != {correlation}")
            return response

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
