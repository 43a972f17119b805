"""ControllerChannel's version negotiation over loopback, with an in-process controller that
serves chosen ranges: every new connection asks ApiVersions first, each request goes at the
highest version both sides serve, and a failed exchange never lowers it (issue 27: with the
old v0 fallback, one dropped connection stopped the offline log dirs reaching that
controller until the broker restarted)."""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import pytest

from rillet.apis import load_all
from rillet.client.connection import KafkaClientError
from rillet.controller import remote
from rillet.controller.channel import INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS, \
    ControllerChannel
from rillet.controller.versions import ApiRanges, choose_version
from rillet.defs.broker_config import Voter
from rillet.dispatch import api_versions_table
from rillet.protocol import errors
from rillet.protocol.build import build
from rillet.protocol.codec import decode_request, encode_response, response_schema

OFFLINE = frozenset({uuid.UUID(int=100)})
HEARTBEAT_ANSWER = {"throttle_time": 0, "error_code": 0, "is_caught_up": True,
                    "is_fenced": False, "should_shut_down": False}


@dataclass
class FakeController:
    """Serves `ranges` in its ApiVersions answer and answers BrokerHeartbeat; records
    (api key, version, request body) of every request. `api_versions_error`: the error
    code its ApiVersions answers carry. `cut_next`: the next request other
    than ApiVersions is read and its connection closed unanswered (a dropped link)."""
    ranges: dict[int, tuple[int, int]]
    seen: list[tuple[int, int, Any]] = field(default_factory=list)
    cut_next: bool = False
    api_versions_error: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                    ) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                header, body = decode_request(await reader.readexactly(size))
                self.seen.append((header.api_key, header.api_version, body))
                if header.api_key != 18 and self.cut_next:
                    self.cut_next = False
                    return
                writer.write(encode_response(header.api_key, header.correlation_id,
                                             self._answer(header.api_key,
                                                          header.api_version)))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    def _answer(self, api_key: int, version: int) -> Any:
        if api_key == 18:
            data: dict[str, Any] = {"error_code": self.api_versions_error,
                                    "throttle_time": 0, "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in self.ranges.items()]}
        elif api_key == remote.BROKER_HEARTBEAT:
            data = HEARTBEAT_ANSWER
        else:
            raise AssertionError(f"unexpected api {api_key}")
        return build(response_schema(api_key, version), data)

    def requests(self) -> list[tuple[int, int]]:
        return [(key, version) for key, version, _ in self.seen]


class OneLeader:
    """The quorum as the channel sees it: node 2 leads, at the fake controller's port."""

    def __init__(self, port: int) -> None:
        self.leader_id, self.is_leader = 2, False
        self.voters = {2: Voter(2, "127.0.0.1", port)}


async def _with_controller(ranges: dict[int, tuple[int, int]],
                           use: Callable[[ControllerChannel, FakeController],
                                         Awaitable[None]]) -> None:
    fake = FakeController(ranges)
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = ControllerChannel(1, "c", OneLeader(port),  # type: ignore[arg-type]
                                None, None, None, 5.0)  # type: ignore[arg-type]
    try:
        await use(channel, fake)
    finally:
        await channel.close()
        server.close()


async def _heartbeat(channel: ControllerChannel) -> None:
    state = await channel.broker_heartbeat(1, 3, 10, False, OFFLINE)
    assert not state.fenced


def test_a_dropped_connection_does_not_lower_the_version() -> None:
    """The old channel asked this controller at v0 (without the offline dirs) for good
    after the one failed exchange."""
    async def use(channel: ControllerChannel, fake: FakeController) -> None:
        await _heartbeat(channel)
        fake.cut_next = True
        with pytest.raises(KafkaClientError):
            await _heartbeat(channel)
        await _heartbeat(channel)
        await _heartbeat(channel)
        # ApiVersions on each new connection, only there; v1 throughout.
        assert fake.requests() == [(18, 0), (63, 1), (63, 1), (18, 0), (63, 1), (63, 1)]
        for _, _, body in fake.seen[-2:]:
            assert tuple(body.offline_log_dirs) == tuple(OFFLINE)
    asyncio.run(_with_controller({18: (0, 3), 63: (0, 1)}, use))


def test_a_controller_serving_only_v0_gets_v0_without_the_offline_dirs() -> None:
    async def use(channel: ControllerChannel, fake: FakeController) -> None:
        await _heartbeat(channel)
        await _heartbeat(channel)
        assert fake.requests() == [(18, 0), (63, 0), (63, 0)]
        assert not hasattr(fake.seen[-1][2], "offline_log_dirs")
    asyncio.run(_with_controller({18: (0, 3), 63: (0, 0)}, use))


def test_no_common_version_fails_with_unsupported_version_and_sends_nothing() -> None:
    async def use(channel: ControllerChannel, fake: FakeController) -> None:
        with pytest.raises(errors.UnsupportedVersion) as err:
            await channel.request(remote.ALTER_PARTITION, remote.ALTER_PARTITION_VERSIONS,
                                  {})
        assert "serves v0-v1" in str(err.value) and "v2-v2" in str(err.value)
        with pytest.raises(errors.UnsupportedVersion) as err:
            await channel.request(remote.ASSIGN_REPLICAS_TO_DIRS,
                                  remote.ASSIGN_REPLICAS_TO_DIRS_VERSIONS, {})
        assert "does not serve api 73" in str(err.value)
        # The connection stays in use: no second ApiVersions.
        await _heartbeat(channel)
        assert fake.requests() == [(18, 0), (63, 1)]
    asyncio.run(_with_controller({18: (0, 3), 63: (0, 1), 56: (0, 1)}, use))


def test_an_api_versions_error_fails_the_request() -> None:
    async def use(channel: ControllerChannel, fake: FakeController) -> None:
        fake.api_versions_error = 35
        with pytest.raises(errors.UnsupportedVersion):
            await _heartbeat(channel)
        fake.api_versions_error = 0
        await _heartbeat(channel)   # on a new connection, asked again
        assert fake.requests() == [(18, 0), (18, 0), (63, 1)]
    asyncio.run(_with_controller({18: (0, 3), 63: (0, 1)}, use))


@pytest.mark.parametrize("key,versions", [
    (remote.CREATE_TOPICS, remote.CREATE_TOPICS_VERSIONS),
    (remote.ALTER_PARTITION, remote.ALTER_PARTITION_VERSIONS),
    (remote.BROKER_REGISTRATION, remote.BROKER_REGISTRATION_VERSIONS),
    (remote.BROKER_HEARTBEAT, remote.BROKER_HEARTBEAT_VERSIONS),
    (remote.ASSIGN_REPLICAS_TO_DIRS, remote.ASSIGN_REPLICAS_TO_DIRS_VERSIONS),
    (INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS)])
def test_this_builds_controller_listener_takes_each_request_at_the_channels_top(
        key: int, versions: tuple[int, int]) -> None:
    load_all()
    ours = ApiRanges({k["api_key"]: (k["min_version"], k["max_version"])
                      for k in api_versions_table("controller")})
    assert choose_version(key, versions, ours, "this build") == versions[1]
