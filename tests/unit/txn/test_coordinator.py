"""TransactionCoordinator over real PartitionLogs (tmp_path): persistence, markers, reload
with a prepared transaction resumed, timeouts.

The broker around it is tests/unit/standin_broker.py, so what is appended to __transaction_state is exactly what a restart replays and
the markers are real control batches in the partition's log.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rillet.protocol import errors
from rillet.defs.broker_config import BrokerConfig
from rillet.storage.log_config import LogConfig
from rillet.txn.coordinator import TransactionCoordinator, txn_state_rf
from rillet.txn.metadata import TxnState
from rillet.txn.state_manager import TXN_TOPIC
from tests.unit import standin_broker

PARTITIONS = 3
Clock = standin_broker.Clock


class Channel:
    """The controller's producer-id blocks."""

    def __init__(self) -> None:
        self.next = 1000

    async def next_producer_id(self) -> int:
        self.next += 1
        return self.next


class StandInBroker(standin_broker.StandInBroker):
    def __init__(self, data: Path) -> None:
        super().__init__(data, {TXN_TOPIC: PARTITIONS, "t": 2}, (TXN_TOPIC, "t"), LogConfig(),
                         **{"transaction.state.log.num.partitions": str(PARTITIONS)})
        self.channel = Channel()
        self.written: list[Any] = []


def coordinator(broker: StandInBroker, clock: Clock) -> TransactionCoordinator:
    return TransactionCoordinator(broker,  # type: ignore[arg-type]
                                  lambda m, tps: broker.written.append((m, tps)), None, clock)


async def settled(coord: TransactionCoordinator, txn_id: str, state: TxnState) -> None:
    for _ in range(200):
        if coord.describe(txn_id).state == state:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{txn_id} never reached {state}: {coord.describe(txn_id)}")


def markers_in(broker: StandInBroker, partition: int) -> list[int]:
    """The producer ids of the control batches in t-<partition>."""
    plog = broker.logs.get("t", partition)
    return [h.producer_id for h, _ in plog.batches() if h.is_control]


def test_commit_writes_markers_and_a_prepared_commit_is_resumed_after_restart(
        tmp_path: Path) -> None:
    clock = Clock()

    async def first_life() -> tuple[int, int]:
        broker = StandInBroker(tmp_path)
        coord = coordinator(broker, clock)
        await coord.start()
        pid, epoch = await coord.init_producer_id("tx", 60000)
        assert (pid, epoch) == (1001, 0)
        await coord.add_partitions("tx", pid, epoch, [("t", 0)])
        await coord.end_txn("tx", pid, epoch, commit=True)
        await settled(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert markers_in(broker, 0) == [pid] and markers_in(broker, 1) == []
        assert [tps for _, tps in broker.written] == [[("t", 0)]]
        # A second transaction stops at PrepareCommit: its markers never go out here.
        await coord.add_partitions("tx", pid, epoch, [("t", 1)])
        coord._complete_later = lambda m, where: None   # type: ignore[method-assign]
        await coord.end_txn("tx", pid, epoch, commit=True)
        assert coord.describe("tx").state == TxnState.PREPARE_COMMIT
        with pytest.raises(errors.ConcurrentTransactions):
            await coord.end_txn("tx", pid, epoch, commit=True)
        await coord.stop()
        await broker.logs.close()
        return pid, epoch

    async def second_life(pid: int) -> None:
        broker = StandInBroker(tmp_path)
        coord = coordinator(broker, clock)
        await coord.start()   # loads PrepareCommit and finishes it
        await settled(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert markers_in(broker, 1) == [pid]
        # The reloaded id is fenced on re-init: epoch bumped.
        assert await coord.init_producer_id("tx", 60000) == (pid, 1)
        await coord.stop()
        await broker.logs.close()

    pid, _ = asyncio.run(first_life())
    asyncio.run(second_life(pid))


def test_an_expired_transaction_is_aborted_and_its_producer_fenced(tmp_path: Path) -> None:
    clock = Clock()

    async def run() -> None:
        broker = StandInBroker(tmp_path)
        coord = coordinator(broker, clock)
        await coord.start()
        pid, epoch = await coord.init_producer_id("tx", 1000)
        await coord.add_partitions("tx", pid, epoch, [("t", 0)])
        assert await coord.abort_timed_out(coord.now()) == 0
        clock.now += 2
        assert await coord.abort_timed_out(coord.now()) == 1
        await settled(coord, "tx", TxnState.COMPLETE_ABORT)
        assert coord.describe("tx").producer_epoch == epoch + 1
        with pytest.raises(errors.ProducerFenced):
            await coord.add_partitions("tx", pid, epoch, [("t", 0)])
        # transactional.id.expiration.ms: the idle id goes.
        clock.now += 8 * 24 * 3600
        assert await coord.expire_ids(coord.now()) == 1
        with pytest.raises(errors.TransactionalIdNotFound):
            coord.describe("tx")
        await coord.stop()
        await broker.logs.close()

    asyncio.run(run())


def test_transaction_state_replication_factor_follows_kafka() -> None:
    """1 on a node that is its own quorum and was not told otherwise (Kafka's single-node
    server.properties); the setting (default 3) everywhere else, never capped."""
    voters = {"process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
              "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
              "controller.quorum.voters":
                  "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"}
    assert txn_state_rf(BrokerConfig.load(overrides={})) == 1
    assert txn_state_rf(BrokerConfig.load(overrides={
        "transaction.state.log.replication.factor": "3"})) == 3
    assert txn_state_rf(BrokerConfig.load(overrides=voters)) == 3
