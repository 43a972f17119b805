"""Group APIs at the wire level, through rillet's own client: the error codes clients rely on."""
from __future__ import annotations

import asyncio
import struct
from typing import Any, Callable

import pytest

from rillet.client import AdminClient, BrokerConnection
from tests.harness import BrokerProcess

pytestmark = pytest.mark.timeout(120)

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT = 0, 22, 25, 26
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 68, 69, 79, 82
GROUP_SUBSCRIBED_TO_TOPIC, INVALID_REQUEST, REBALANCE_IN_PROGRESS = 86, 42, 27


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def code(value: Any) -> int:
    return int(getattr(value, "value", value))


@pytest.fixture
def gbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config={"group.initial.rebalance.delay.ms": 0})


def join_body(member_id: str = "", instance: str | None = None, session: int = 6000,
              topic: str = "wire") -> dict[str, Any]:
    return {"group_id": "wire-g", "session_timeout": session, "rebalance_timeout": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}]}


def test_group_lifecycle_error_codes(gbroker: BrokerProcess) -> None:
    async def scenario() -> None:
        async with AdminClient(gbroker.bootstrap) as admin:
            await admin.create_topic("wire", 2)
        conn = await BrokerConnection("127.0.0.1", gbroker.port).connect()
        try:
            await run(conn)
        finally:
            await conn.close()

    async def run(conn: BrokerConnection) -> None:
        found = await conn.request(FIND_COORDINATOR, 4, {"key_type": 0,
                                                         "coordinator_keys": ["wire-g", "x"]})
        assert [(code(c.error_code), c.port) for c in found.coordinators] == \
               [(NONE, gbroker.port)] * 2
        share = await conn.request(FIND_COORDINATOR, 3, {"key": "t", "key_type": 2})
        assert code(share.error_code) == INVALID_REQUEST

        bad = await conn.request(JOIN, 5, join_body(session=10))
        assert code(bad.error_code) == INVALID_SESSION_TIMEOUT
        first = await conn.request(JOIN, 5, join_body())
        assert code(first.error_code) == MEMBER_ID_REQUIRED and first.member_id
        me = first.member_id
        joined = await conn.request(JOIN, 5, join_body(me))
        assert code(joined.error_code) == NONE and joined.leader == me
        assert joined.generation_id == 1 and joined.protocol_name == "range"
        assert [m.member_id for m in joined.members] == [me]
        synced = await conn.request(SYNC, 3, {
            "group_id": "wire-g", "generation_id": 1, "member_id": me,
            "group_instance_id": None,
            "assignments": [{"member_id": me, "assignment": b"my-partitions"}]})
        assert code(synced.error_code) == NONE and synced.assignment == b"my-partitions"

        def commit(generation: int, member: str, offset: int) -> dict[str, Any]:
            return {"group_id": "wire-g", "generation_id_or_member_epoch": generation,
                    "member_id": member, "group_instance_id": None,
                    "topics": [{"name": "wire", "partitions": [
                        {"partition_index": 0, "committed_offset": offset,
                         "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}

        async def commit_code(generation: int, member: str, offset: int) -> int:
            resp = await conn.request(COMMIT, 8, commit(generation, member, offset))
            return code(resp.topics[0].partitions[0].error_code)

        assert await commit_code(1, me, 5) == NONE
        assert await commit_code(0, me, 6) == ILLEGAL_GENERATION  # stale generation
        assert await commit_code(1, "stranger", 6) == UNKNOWN_MEMBER_ID
        fetched = await conn.request(FETCH, 8, {"groups": [
            {"group_id": "wire-g", "topics": [{"name": "wire", "partition_indexes": [0, 1]}]},
            {"group_id": "nobody", "topics": None}], "require_stable": True})
        g0, g1 = fetched.groups
        assert [(p.partition_index, p.committed_offset, p.metadata)
                for p in g0.topics[0].partitions] == [(0, 5, "m"), (1, -1, "")]
        assert code(g1.error_code) == NONE and g1.topics == ()

        hb = await conn.request(HEARTBEAT, 4, {"group_id": "wire-g", "generation_id": 1,
                                               "member_id": me, "group_instance_id": None})
        assert code(hb.error_code) == NONE
        hb = await conn.request(HEARTBEAT, 4, {"group_id": "wire-g", "generation_id": 0,
                                               "member_id": me, "group_instance_id": None})
        assert code(hb.error_code) == ILLEGAL_GENERATION

        desc = (await conn.request(DESCRIBE, 5, {"groups": ["wire-g", "ghost"],
                                                 "include_authorized_operations": False})).groups
        assert (desc[0].group_state, desc[0].protocol_data) == ("Stable", "range")
        assert desc[0].members[0].member_assignment == b"my-partitions"
        assert desc[0].members[0].client_host == "/127.0.0.1"
        assert (code(desc[1].error_code), desc[1].group_state) == (NONE, "Dead")
        listed = await conn.request(LIST, 4, {"states_filter": ["stable"]})
        assert ("wire-g", "consumer", "Stable") in [
            (g.group_id, g.protocol_type, g.group_state) for g in listed.groups]
        listed = await conn.request(LIST, 4, {"states_filter": ["Empty"]})
        assert "wire-g" not in [g.group_id for g in listed.groups]

        deleted = await conn.request(DELETE, 2, {"groups_names": ["wire-g", "ghost"]})
        assert [code(r.error_code) for r in deleted.results] == [NON_EMPTY_GROUP,
                                                                 GROUP_ID_NOT_FOUND]
        od = await conn.request(OFFSET_DELETE, 0, {"group_id": "wire-g", "topics": [
            {"name": "wire", "partitions": [{"partition_index": 0}]}]})
        assert code(od.topics[0].partitions[0].error_code) == GROUP_SUBSCRIBED_TO_TOPIC

        left = await conn.request(LEAVE, 4, {"group_id": "wire-g", "members": [
            {"member_id": me, "group_instance_id": None},
            {"member_id": "stranger", "group_instance_id": None}]})
        assert [code(m.error_code) for m in left.members] == [NONE, UNKNOWN_MEMBER_ID]
        desc = (await conn.request(DESCRIBE, 5, {"groups": ["wire-g"],
                                                 "include_authorized_operations": False})).groups
        assert desc[0].group_state == "Empty"
        # An empty group takes admin commits (generation -1, no member).
        assert await commit_code(-1, "", 9) == NONE
        od = await conn.request(OFFSET_DELETE, 0, {"group_id": "wire-g", "topics": [
            {"name": "wire", "partitions": [{"partition_index": 0}]}]})
        assert code(od.topics[0].partitions[0].error_code) == NONE
        deleted = await conn.request(DELETE, 2, {"groups_names": ["wire-g"]})
        assert code(deleted.results[0].error_code) == NONE
        listed = await conn.request(LIST, 4, {"states_filter": []})
        assert "wire-g" not in [g.group_id for g in listed.groups]

    asyncio.run(scenario())


def test_static_member_fencing_and_rebalance_signal(gbroker: BrokerProcess) -> None:
    async def scenario() -> None:
        async with AdminClient(gbroker.bootstrap) as admin:
            await admin.create_topic("wire", 1)
        conn = await BrokerConnection("127.0.0.1", gbroker.port).connect()
        other = await BrokerConnection("127.0.0.1", gbroker.port).connect()
        try:
            await conn.request(FIND_COORDINATOR, 3, {"key": "wire-g", "key_type": 0})
            a = await conn.request(JOIN, 5, join_body(instance="inst"))
            assert code(a.error_code) == NONE  # static members need no MEMBER_ID_REQUIRED
            await conn.request(SYNC, 3, {"group_id": "wire-g", "generation_id": 1,
                                         "member_id": a.member_id, "group_instance_id": "inst",
                                         "assignments": [{"member_id": a.member_id,
                                                          "assignment": b"p0"}]})
            # The same instance id again (a restart): takes over, the old id is fenced.
            b = await conn.request(JOIN, 5, join_body(instance="inst"))
            assert code(b.error_code) == NONE and b.member_id != a.member_id
            assert b.generation_id == 1  # no rebalance
            hb = await conn.request(HEARTBEAT, 4, {"group_id": "wire-g", "generation_id": 1,
                                                   "member_id": a.member_id,
                                                   "group_instance_id": "inst"})
            assert code(hb.error_code) == FENCED_INSTANCE_ID
            s = await conn.request(SYNC, 3, {"group_id": "wire-g", "generation_id": 1,
                                             "member_id": b.member_id,
                                             "group_instance_id": "inst", "assignments": []})
            assert s.assignment == b"p0"
            # A dynamic member joining makes heartbeats answer REBALANCE_IN_PROGRESS.
            pending = asyncio.create_task(other.request(JOIN, 3, join_body()))
            # NONE until the broker has taken the newcomer's JoinGroup in, on its own time.
            deadline, answers = asyncio.get_running_loop().time() + 10, []
            while not answers or answers[-1] == NONE:
                assert asyncio.get_running_loop().time() < deadline, answers[-5:]
                hb = await conn.request(HEARTBEAT, 4, {"group_id": "wire-g", "generation_id": 1,
                                                       "member_id": b.member_id,
                                                       "group_instance_id": "inst"})
                answers.append(code(hb.error_code))
                await asyncio.sleep(0.05)
            assert answers[-1] == REBALANCE_IN_PROGRESS, answers
            rejoin = await conn.request(JOIN, 5, join_body(b.member_id, instance="inst"))
            newcomer = await asyncio.wait_for(pending, 10)
            assert rejoin.generation_id == newcomer.generation_id == 2
        finally:
            await conn.close()
            await other.close()

    asyncio.run(scenario())
