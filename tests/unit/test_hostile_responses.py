"""What rillet reads from a peer is bounded too: a hostile or broken answer to rillet's
client or to a broker's controller channel is a failed request, never a process abort
(kio's native reader would allocate whatever a count says) nor a hang."""
from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace as NS
from typing import Awaitable, Callable

import pytest

from rillet.client.connection import BrokerConnection, KafkaClientError
from rillet.controller.channel import ControllerChannel
from rillet.protocol.build import build
from rillet.protocol.codec import encode_response, response_schema
from tests.wire import uvarint

# What both ask the hostile peer: Metadata v12 of every topic.
METADATA = (3, 12, {"topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
# Metadata v12 response (flexible header v1) whose brokers array claims ~4 billion entries.
HUGE_COUNT = struct.pack(">i", 0) + uvarint(2**32 - 16)


def _answers(payload: Callable[[bytes], bytes]) -> Callable[..., Awaitable[None]]:
    """A peer that reads one request and writes payload(correlation id bytes); an
    ApiVersions before it (the controller channel's, on a new connection) is answered
    truly, with Metadata's range, so the hostile bytes answer the Metadata request."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(size)
            if struct.unpack_from(">h", frame)[0] != 18:
                break
            writer.write(encode_response(18, struct.unpack_from(">i", frame, 4)[0], build(
                response_schema(18, 0), {"error_code": 0, "api_keys": [
                    {"api_key": METADATA[0], "min_version": 0, "max_version": 12}]})))
        writer.write(payload(frame[4:8]))
        await writer.drain()
        await reader.read()  # until the client gives up on this connection
        writer.close()
    return serve


HOSTILE = {
    "a huge array count": lambda corr: struct.pack(">i", 4 + 1 + len(HUGE_COUNT))
    + corr + b"\x00" + HUGE_COUNT,
    "a size under a correlation id": lambda corr: struct.pack(">i", 2) + b"\x00\x00",
    "a negative size": lambda corr: struct.pack(">i", -7),
    "a frame cut short": lambda corr: struct.pack(">i", 9) + corr + b"\x00",
}


async def _with_peer(payload: Callable[[bytes], bytes],
                     use: Callable[[int], Awaitable[object]]) -> None:
    server = await asyncio.start_server(_answers(payload), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(KafkaClientError):
            await use(port)
    finally:
        server.close()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_admin_client_refuses_a_hostile_response(kind: str) -> None:
    async def use(port: int) -> object:
        conn = BrokerConnection("127.0.0.1", port, timeout=2.0)
        try:
            return await conn.request(*METADATA)
        finally:
            await conn.close()
    asyncio.run(_with_peer(HOSTILE[kind], use))


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_controller_channel_refuses_a_hostile_response(kind: str) -> None:
    async def use(port: int) -> object:
        voter = NS(node_id=2, host="127.0.0.1", port=port)
        raft = NS(leader_id=2, voters={2: voter}, is_leader=False)
        channel = ControllerChannel(1, "c", raft, NS(), NS(), None, 2.0)  # type: ignore[arg-type]
        try:
            key, version, body = METADATA
            return await channel.request(key, (version, version), body)
        finally:
            await channel.close()
    asyncio.run(_with_peer(HOSTILE[kind], use))
