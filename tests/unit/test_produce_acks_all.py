"""Produce acks=all on a single node (issue 30): the leader is the whole ISR, so the request is
answered on the append path, as acks=1 is: the handler finishes without once giving the event
loop a turn (no purgatory wait, no task, no later loop iteration). A real broker runs in this
process (storage, its one-voter quorum; no listener is opened) and the Produce frame goes
through the dispatcher; min.insync.replicas above the ISR still answers NOT_ENOUGH_REPLICAS."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Coroutine

import pytest

from rillet.apis import load_all
from rillet.broker import Broker
from rillet.defs.broker_config import BrokerConfig
from rillet.dispatch import dispatch_frame
from rillet.protocol import errors
from rillet.protocol.build import build
from rillet.protocol.codec import decode_response, encode_request, request_schema
from rillet.records import Record, encode_batch

PRODUCE, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 19, 22


def _frame(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, 1, "t", build(request_schema(api_key, version),
                                                          body))[4:]


async def _call(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    raw = await dispatch_frame(broker, _frame(api_key, version, body), "t", 1)
    assert isinstance(raw, bytes)
    return decode_response(api_key, version, raw[4:])[1]


def _without_yielding(coro: Coroutine[Any, Any, Any]) -> Any:
    """The coroutine's result when it completes at its first step; fails if it suspends."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("the request waited for a later turn of the event loop")


def _produce(topic: str, acks: int, producer: tuple[int, int] | None, sequence: int) -> bytes:
    records = [Record(i, 1_700_000_000_000 + i, None, b"v" * 100) for i in range(5)]
    batch = encode_batch(records) if producer is None else encode_batch(
        records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence)
    return _frame(PRODUCE, 11, {
        "transactional_id": None, "acks": acks, "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})


async def _single_node(tmp_path: Path, **config: str) -> Broker:
    load_all()
    broker = Broker(BrokerConfig.load(None, {"log.dirs": str(tmp_path),
                                             "listeners": "PLAINTEXT://127.0.0.1:9", **config}))
    await broker.start()
    await _call(broker, CREATE_TOPICS, 5, {
        "topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 30000, "validate_only": False})
    deadline = time.monotonic() + 30
    while ("t", 0) not in broker.replication.leaders:
        assert time.monotonic() < deadline, "no leader role for t-0 after 30 s"
        await asyncio.sleep(0.01)
    return broker


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_acks_all_on_a_single_node_is_answered_without_waiting(
        tmp_path: Path, idempotent: bool) -> None:
    async def run() -> None:
        broker = await _single_node(tmp_path)
        try:
            producer = None
            if idempotent:
                pid = await _call(broker, INIT_PRODUCER_ID, 4, {
                    "transactional_id": None, "transaction_timeout_ms": -1,
                    "producer_id": -1, "producer_epoch": -1})
                producer = (pid.producer_id, pid.producer_epoch)
            for n in range(3):
                raw = _without_yielding(dispatch_frame(
                    broker, _produce("t", -1, producer, 5 * n), "t", 1))
                part = decode_response(PRODUCE, 11, raw[4:])[1].responses[0] \
                    .partition_responses[0]
                assert (part.error_code, part.base_offset) == (0, 5 * n)
            plog = broker.logs.get("t", 0)
            assert plog is not None and plog.high_watermark == plog.log_end_offset == 15
        finally:
            await broker.stop()

    asyncio.run(run())


def test_acks_all_above_the_isr_is_not_enough_replicas(tmp_path: Path) -> None:
    async def run() -> None:
        broker = await _single_node(tmp_path, **{"min.insync.replicas": "2"})
        try:
            raw = await dispatch_frame(broker, _produce("t", -1, None, 0), "t", 1)
            part = decode_response(PRODUCE, 11, raw[4:])[1].responses[0].partition_responses[0]
            assert part.error_code == errors.NotEnoughReplicas.code
            raw = await dispatch_frame(broker, _produce("t", 1, None, 0), "t", 1)
            part = decode_response(PRODUCE, 11, raw[4:])[1].responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 0)   # acks=1 does not ask
        finally:
            await broker.stop()

    asyncio.run(run())
