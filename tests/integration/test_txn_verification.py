"""KIP-890 part 1 with real broker processes: AddPartitionsToTxn v4-5 (the batched,
verify-only broker-to-coordinator form) and the partition leader's verification before a
producer's first transactional batch, so a batch for a partition the transaction never added
(or arriving after its transaction ended) cannot open a hanging transaction.

Raw requests go through tests/wire.py (no client can send a transactional batch to a
partition it did not add); confluent-kafka's transactional producer shows the normal path
still works, on one node and on three where the coordinator and the leaders differ.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest

from rillet.records import Record, encode_batch
from tests.harness import BrokerProcess
from tests.polling import read_until

from ..wire import Wire
from .clients import create_topic
from .test_txn_coordinator import consume_all, transaction, txn_producer

WAIT_S = 30.0
NONE, NOT_ENOUGH_REPLICAS, NOT_COORDINATOR, INVALID_TXN_STATE = 0, 19, 16, 48
CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, TRANSACTION_ABORTABLE = 51, 90, 120
INVALID_PRODUCER_EPOCH = 47


SMALL_STATE = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
               "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def txn_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config=SMALL_STATE)


class RawTxn:
    """One transactional producer spoken to on the wire (InitProducerId, AddPartitionsToTxn,
    Produce, EndTxn), bypassing every client-side check."""

    def __init__(self, wire: Wire, txn_id: str, coordinator: Wire | None = None) -> None:
        self.wire, self.txn_id = wire, txn_id
        self.coordinator = coordinator or wire
        # FindCoordinator creates __transaction_state on first use.
        read_until(lambda: self.coordinator.request(10, 3, {"key": txn_id, "key_type": 1}),
                   lambda r: r.error_code == NONE, WAIT_S)
        init = read_until(lambda: self.coordinator.request(22, 4, {
            "transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}), lambda r: r.error_code not in (
                CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, 14, 15), WAIT_S)
        assert init.error_code == NONE, init
        self.pid, self.epoch = init.producer_id, init.producer_epoch
        self.sequence: dict[tuple[str, int], int] = {}

    def add(self, topic: str, partitions: list[int]) -> list[int]:
        resp = self.coordinator.request(24, 3, {
            "v3_and_below_transactional_id": self.txn_id, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})
        return [p.partition_error_code for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition]

    def verify(self, topic: str, partitions: list[int], version: int = 5,
               epoch: int | None = None) -> Any:
        return self.coordinator.request(24, version, {"transactions": [{
            "transactional_id": self.txn_id, "producer_id": self.pid,
            "producer_epoch": self.epoch if epoch is None else epoch, "verify_only": True,
            "topics": [{"name": topic, "partitions": partitions}]}]})

    def produce(self, topic: str, partition: int, value: str, version: int = 11) -> Any:
        seq = self.sequence.get((topic, partition), 0)
        batch = encode_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None,
                                     value=value.encode(), headers=[])],
                             producer_id=self.pid, producer_epoch=self.epoch,
                             base_sequence=seq, is_transactional=True)
        resp = self.wire.request(0, version, {
            "transactional_id": self.txn_id, "acks": -1, "timeout": 10000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        answer = resp.responses[0].partition_responses[0]
        if answer.error_code == NONE:
            self.sequence[(topic, partition)] = seq + 1
        return answer

    def end(self, commit: bool) -> int:
        return read_until(lambda: self.coordinator.request(26, 3, {
            "transactional_id": self.txn_id, "producer_id": self.pid,
            "producer_epoch": self.epoch, "committed": commit}),
            lambda r: r.error_code != CONCURRENT_TRANSACTIONS, WAIT_S).error_code


@contextmanager
def raw_transaction(bootstrap: str, prefix: str, partitions: int
                    ) -> Iterator[tuple[Wire, RawTxn, str]]:
    """A fresh topic and a raw transaction that added its partition 0."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=partitions)
    with Wire(bootstrap) as wire:
        txn = RawTxn(wire, f"tx-{topic}")
        assert txn.add(topic, [0]) == [NONE]
        yield wire, txn, topic


def _codes(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_error_code
            for txn in resp.results_by_transaction for t in txn.topic_results
            for p in t.results_by_partition}


def _stable_end(wire: Wire, topic: str, partition: int) -> tuple[int, int]:
    """(read_committed latest offset, read_uncommitted latest offset) of a partition."""
    def latest(isolation: int) -> int:
        resp = wire.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1,
                                            "current_leader_epoch": -1}]}]})
        return resp.topics[0].partitions[0].offset
    return latest(1), latest(0)


def test_add_partitions_to_txn_v4_v5_verify_only_answers_per_partition(
        txn_broker: BrokerProcess) -> None:
    topic = f"ver-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=2)
    with Wire(txn_broker.bootstrap) as wire:
        versions = {k.api_key: (k.min_version, k.max_version)
                    for k in wire.request(18, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"}).api_keys}
        assert versions[24] == (0, 5)
        txn = RawTxn(wire, f"tx-{topic}")
        assert txn.add(topic, [0]) == [NONE]
        v5 = txn.verify(topic, [0, 1])
        assert v5.error_code == NONE and [r.transactional_id for r in
                                          v5.results_by_transaction] == [txn.txn_id]
        assert _codes(v5) == {(topic, 0): NONE, (topic, 1): TRANSACTION_ABORTABLE}
        assert _codes(txn.verify(topic, [0, 1], version=4)) == {
            (topic, 0): NONE, (topic, 1): INVALID_TXN_STATE}
        assert set(_codes(txn.verify(topic, [0], epoch=txn.epoch + 1)).values()) == {
            PRODUCER_FENCED}
        # Verifying added nothing: partition 1 is still not in the transaction.
        assert _codes(txn.verify(topic, [1])) == {(topic, 1): TRANSACTION_ABORTABLE}
        # VerifyOnly=false adds, as v0-3 do.
        added = wire.request(24, 5, {"transactions": [{
            "transactional_id": txn.txn_id, "producer_id": txn.pid,
            "producer_epoch": txn.epoch, "verify_only": False,
            "topics": [{"name": topic, "partitions": [1]}]}]})
        assert _codes(added) == {(topic, 1): NONE}
        assert _codes(txn.verify(topic, [0, 1])) == {(topic, 0): NONE, (topic, 1): NONE}
        assert txn.end(commit=False) == NONE


def test_a_transactional_batch_for_a_partition_not_in_the_transaction_is_refused(
        txn_broker: BrokerProcess) -> None:
    with raw_transaction(txn_broker.bootstrap, "vpr", partitions=3) as (wire, txn, topic):
        assert txn.produce(topic, 0, "in-txn").error_code == NONE
        assert txn.produce(topic, 0, "in-txn-2").error_code == NONE
        refused = txn.produce(topic, 1, "never-added")
        assert refused.error_code == TRANSACTION_ABORTABLE, refused
        assert txn.produce(topic, 2, "never-added", version=9).error_code == INVALID_TXN_STATE
        assert txn.end(commit=True) == NONE
        # The transaction is over: a late batch of it (same producer, same epoch) may not
        # open a new transaction on the partition it wrote to.
        late = read_until(lambda: txn.produce(topic, 0, "late"),
                          lambda r: r.error_code != NOT_ENOUGH_REPLICAS, WAIT_S)
        assert late.error_code == TRANSACTION_ABORTABLE, late
        # Nothing hangs: every partition's last stable offset is its end.
        for p in range(3):
            stable, end = read_until(lambda: _stable_end(wire, topic, p),
                                     lambda r: r[0] == r[1], WAIT_S)
            assert stable == end
        assert _stable_end(wire, topic, 0)[1] == 3   # two records and the marker
        assert _stable_end(wire, topic, 1) == (0, 0)
    assert sorted(consume_all(txn_broker.bootstrap, topic, "read_committed", 2)) == [
        "in-txn", "in-txn-2"]


def test_txn_offset_commit_needs_the_group_in_the_transaction(txn_broker: BrokerProcess) -> None:
    topic = f"voc-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=1)
    with Wire(txn_broker.bootstrap) as wire:
        def commit(txn: RawTxn, group: str, version: int) -> int:
            read_until(lambda: wire.request(10, 3, {"key": group, "key_type": 0}),
                       lambda r: r.error_code == NONE, WAIT_S)
            resp = read_until(lambda: wire.request(28, version, {
                "transactional_id": txn.txn_id, "group_id": group, "producer_id": txn.pid,
                "producer_epoch": txn.epoch, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "committed_offset": 5,
                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
                lambda r: r.topics[0].partitions[0].error_code not in (14, 15, 16),
                WAIT_S)
            return resp.topics[0].partitions[0].error_code

        for version, refusal in ((4, TRANSACTION_ABORTABLE), (3, INVALID_TXN_STATE)):
            txn = RawTxn(wire, f"tx-{topic}-v{version}")
            assert txn.add(topic, [0]) == [NONE]
            # No AddOffsetsToTxn: the group's offsets partition is not in the transaction.
            assert commit(txn, f"g-{topic}", version) == refusal
            assert txn.end(commit=False) == NONE
        txn = RawTxn(wire, f"tx-{topic}-added")
        group = f"g-{topic}-added"
        added = read_until(lambda: wire.request(25, 3, {
            "transactional_id": txn.txn_id, "producer_id": txn.pid,
            "producer_epoch": txn.epoch, "group_id": group}),
            lambda r: r.error_code != CONCURRENT_TRANSACTIONS, WAIT_S)
        assert added.error_code == NONE
        assert commit(txn, group, 4) == NONE
        assert commit(txn, group, 4) == NONE    # ongoing there now: not asked again
        assert txn.end(commit=True) == NONE


def test_verification_can_be_turned_off(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(config={**SMALL_STATE,
                                    "transaction.partition.verification.enable": "false"})
    with raw_transaction(broker.bootstrap, "voff", partitions=64) as (wire, txn, topic):
        # Kafka before KIP-890: a batch for a partition the transaction never added is
        # taken and opens a transaction no marker will end (partition 1 hangs).
        assert txn.produce(topic, 1, "unverified").error_code == NONE
        assert txn.end(commit=False) == NONE
        assert _stable_end(wire, topic, 1) == (0, 1)
        # The setting is dynamic: turned on for the cluster, the next produce is verified.
        altered = wire.request(44, 1, {"resources": [{
            "resource_type": 4, "resource_name": "", "configs": [{
                "name": "transaction.partition.verification.enable", "config_operation": 0,
                "value": "true"}]}], "validate_only": False})
        assert altered.responses[0].error_code == NONE, altered
        second = RawTxn(wire, f"tx-{topic}-on")
        assert second.add(topic, [0]) == [NONE]
        # Until the change reaches the broker a produce is taken (and hangs its partition),
        # so each try goes to another never-added partition: 62 tries half a second apart
        # give the change as long as a loaded machine may take to apply it.
        tries = iter(range(2, 64))
        refused = read_until(lambda: second.produce(topic, next(tries), "verified"),
                             lambda r: r.error_code != NONE, 29, interval=0.5)
        assert refused.error_code == TRANSACTION_ABORTABLE, refused
        assert second.end(commit=False) == NONE


def test_confluent_transactions_pass_verification(txn_broker: BrokerProcess) -> None:
    topic = f"vcf-{uuid.uuid4().hex[:6]}"
    create_topic(txn_broker.bootstrap, topic, partitions=3)
    producer = txn_producer(txn_broker.bootstrap, f"tx-{topic}")
    for round_ in range(3):   # each transaction re-verifies every partition it writes
        transaction(producer, topic, [f"c{round_}-{i}" for i in range(20)])
        transaction(producer, topic, [f"a{round_}-{i}" for i in range(10)], commit=False)
    committed = consume_all(txn_broker.bootstrap, topic, "read_committed", 60)
    assert sorted(committed) == sorted(f"c{r}-{i}" for r in range(3) for i in range(20))


def test_verification_across_nodes(tmp_path: Path) -> None:
    """Three nodes: the leader of the partitions is not the transactional id's coordinator,
    so it asks over the inter-broker listener (AddPartitionsToTxn v5)."""
    from tests.integration.test_cluster import _address
    from tests.integration.test_replication import _cluster, _replicated_topic
    state = {"transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
             "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
    topic, txn_id = "verify-remote", "tx-verify-remote"
    with _cluster(tmp_path, **state).start() as cluster:
        with Wire(_address(cluster, cluster.node_ids[0])) as wire:
            found = read_until(lambda: wire.request(10, 3, {"key": txn_id, "key_type": 1}),
                               lambda r: r.error_code == NONE, WAIT_S)
        coordinator = found.node_id
        leader = next(n for n in cluster.node_ids if n != coordinator)
        third = next(n for n in cluster.node_ids if n not in (coordinator, leader))
        _replicated_topic(cluster, topic, 2,
                          assignment=[[leader, coordinator, third], [leader, third, coordinator]])
        with Wire(_address(cluster, leader)) as at_leader, \
                Wire(_address(cluster, coordinator)) as at_coordinator:
            # Only the coordinator answers for the id.
            elsewhere = RawTxn.__new__(RawTxn)
            elsewhere.coordinator, elsewhere.txn_id, elsewhere.pid, elsewhere.epoch = (
                at_leader, txn_id, 0, 0)
            assert set(_codes(elsewhere.verify(topic, [0])).values()) == {NOT_COORDINATOR}
            txn = RawTxn(at_leader, txn_id, coordinator=at_coordinator)
            assert txn.add(topic, [0]) == [NONE]
            ok = read_until(lambda: txn.produce(topic, 0, "in-txn"),
                            lambda r: r.error_code != NOT_ENOUGH_REPLICAS, WAIT_S)
            assert ok.error_code == NONE, ok
            assert txn.produce(topic, 1, "never-added").error_code == TRANSACTION_ABORTABLE
            assert txn.end(commit=True) == NONE
        producer = txn_producer(cluster.bootstrap, f"{txn_id}-client")
        transaction(producer, topic, [f"c{i}" for i in range(20)])
        transaction(producer, topic, [f"a{i}" for i in range(5)], commit=False)
        assert sorted(consume_all(cluster.bootstrap, topic, "read_committed", 21)) == sorted(
            ["in-txn"] + [f"c{i}" for i in range(20)])
