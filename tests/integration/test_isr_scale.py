"""Many partitions, one broker killed -9 and restarted under a producer (issue 25).

Before AlterPartition was batched, each leader sent one request per partition, the
controller committed roughly 5-25 of them a second, and broker heartbeats waited behind
them on its decision lock: during a restarted node's ISR re-expansion with a few hundred
partitions the controller fenced the healthy brokers ("broker 1 fenced (no heartbeat for
9.2s)"). Now every ISR change of a leader travels in one request per controller round
trip and is committed as one metadata batch, and heartbeats count from their arrival.

The test runs 3 real nodes with Kafka's default session and heartbeat timeouts, a topic of
RILLET_ISR_SCALE_PARTITIONS partitions (default the issue's 2,000: 192 s and 210 s on 2
cores at load average ~17; 300 takes ~70 s), RF=3, min.insync.replicas=2, an
idempotent acks=all producer writing to every partition throughout. A broker other than
the active controller is killed -9 and started again. It asserts:
- from the committed metadata records (the __cluster_metadata log of the node that was the
  active controller, read from disk): no broker but the killed one was ever fenced, and
  that one at most once;
- every ISR is full again within ISR_FULL_BOUND_S of the restart;
- everything acknowledged is read back (tests/checker.py).
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.metadata import records as mrec
from rillet.records import BATCH_HEADER_SIZE, decode_records, read_header
from tests.checker import Read, check
from tests.cluster import LocalCluster
from tests.integration.test_cluster import _leader
from tests.integration.test_replication import AckingProducer
from tests.polling import read_until, wait_until

PARTITIONS = int(os.environ.get("RILLET_ISR_SCALE_PARTITIONS", "2000"))
# From the restart of the killed broker (process start, log recovery, catch-up included)
# until every ISR is full again. Scales with the partition count: a 2,000-partition run
# gets longer.
ISR_FULL_BOUND_S = float(os.environ.get("RILLET_ISR_SCALE_BOUND_S",
                                        str(max(90.0, PARTITIONS * 0.06))))
WAIT_S = max(60.0, PARTITIONS * 0.06)
TOPIC = "many"
ACKED_FIRST = 200   # acknowledged writes before the kill, and again after the restart
# Kafka's default session (9 s) and heartbeat (2 s) timeouts, as in the incident. The
# metadata log is never snapshotted during the test, so every record it committed stays
# readable from disk.
CONFIG = {"metadata.log.max.record.bytes.between.snapshots": 1 << 40}


def _isrs(admin: AdminClient) -> dict[int, tuple[int, ...]]:
    try:
        topic = admin.list_topics(topic=TOPIC, timeout=10).topics.get(TOPIC)
    except Exception:
        return {}
    if topic is None or topic.error is not None:
        return {}
    return {p.id: tuple(p.isrs) for p in topic.partitions.values()}


def _all_full(isrs: dict[int, tuple[int, ...]]) -> bool:
    return len(isrs) == PARTITIONS and all(len(isr) == 3 for isr in isrs.values())


def _read_to_end(bootstrap: str, timeout: float) -> list[Read]:
    """Every record of TOPIC, read from the start until every partition reached its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{random.random()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    at_end: set[int] = set()
    got: list[Read] = []
    try:
        deadline = time.monotonic() + timeout
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                assert msg.error() is None, msg.error()
                at_end.discard(msg.partition())
                got.append(Read(msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def metadata_records(log_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    """(offset, record) of every whole batch in a node's metadata log on disk (a batch
    being written at the end is left out)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for segment in sorted((log_dir / "__metadata" / "__cluster_metadata-0").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + BATCH_HEADER_SIZE <= len(data):
            header = read_header(data, pos)
            if header.size <= 0 or pos + header.size > len(data):
                break
            _, records = decode_records(data[pos:pos + header.size])
            out += [(r.offset, mrec.decode(r.value or b""))
                    for r in records]
            pos += header.size
    return out


def _fences(cluster: LocalCluster, node_id: int) -> list[tuple[int, int]]:
    """(offset, broker) of every FENCE_BROKER record in `node_id`'s metadata log."""
    return [(offset, rec["node_id"]) for offset, rec in
            metadata_records(cluster.specs[node_id - 1].log_dir)
            if rec["type"] == mrec.FENCE_BROKER]


def _raft_epoch(cluster: LocalCluster) -> int:
    """The highest metadata quorum epoch any node has stored (quorum-state): how many
    elections the controllers went through, which a loaded node's stalls show first."""
    epochs = []
    for spec in cluster.specs:
        try:
            epochs.append(json.loads((spec.log_dir / "__metadata" / "quorum-state")
                                     .read_text())["epoch"])
        except (OSError, ValueError, KeyError):
            continue   # being rewritten: the others still tell
    return max(epochs, default=0)


def _timed(what: str, bound: float, done: Callable[[], bool]) -> float:
    start = time.monotonic()
    wait_until(done, bound, what, interval=0.5)
    return time.monotonic() - start


# ~200 s at 2,000 partitions on 2 loaded cores; the bound grows with the partitions.
@pytest.mark.timeout(300 + PARTITIONS // 4)
def test_a_broker_killed_and_restarted_under_load_fences_no_healthy_broker(
        cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(3, extra_config=CONFIG)
    controller = _leader(cluster)
    first_epoch = _raft_epoch(cluster)
    victim = next(n for n in cluster.node_ids if n != controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "min.insync.replicas": "2"})], request_timeout=60).values():
        future.result()
    _timed("every ISR full after creation", WAIT_S, lambda: _all_full(_isrs(admin)))
    fences_at_start = _fences(cluster, controller)

    producer = AckingProducer(cluster.bootstrap, TOPIC, PARTITIONS,
                              **{"message.timeout.ms": 180000}).start()
    try:
        # The server answers a connection's requests one at a time and librdkafka sends
        # one partition per ProduceRequest: acks=all throughput is a few hundred records a
        # second here, whatever the partition count.
        wait_until(lambda: len(producer.acked) >= ACKED_FIRST, WAIT_S, "writes acknowledged")
        cluster.kill_node(victim)
        survivors = AdminClient({"bootstrap.servers": ",".join(
            s.client_address for s in cluster.specs if s.node_id != victim), "log_level": 3})
        # Fenced after its session (9 s), out of every ISR: then it comes back.
        _timed(f"broker {victim} out of every ISR", WAIT_S, lambda: (isrs := _isrs(
            survivors)) != {} and all(victim not in isr for isr in isrs.values()))
        acked_before_restart = len(producer.acked)
        cluster.start_node(victim, wait=False)
        restarted = time.monotonic()
        isrs = read_until(lambda: _isrs(survivors), _all_full, ISR_FULL_BOUND_S, 0.5)
        took = time.monotonic() - restarted
        short = {p: isr for p, isr in isrs.items() if len(isr) < 3}
        assert _all_full(isrs), (
            f"{len(short)} of {PARTITIONS} ISRs still short {ISR_FULL_BOUND_S:.0f}s after "
            f"the restart, e.g. {dict(list(short.items())[:5])}; Raft epochs "
            f"{first_epoch} -> {_raft_epoch(cluster)}")
        print(f"\n{PARTITIONS} partitions: every ISR full {took:.1f}s after the restart; "
              f"Raft epochs {first_epoch} -> {_raft_epoch(cluster)}")
        wait_until(lambda: len(producer.acked) > acked_before_restart + ACKED_FIRST, WAIT_S,
                   "writes acknowledged after the restart")
    finally:
        producer.stop()

    # The controller's own records: only the killed broker was fenced, once.
    fences = [(o, b) for o, b in _fences(cluster, controller) if (o, b) not in fences_at_start]
    healthy = [(o, b) for o, b in fences if b != victim]
    assert healthy == [], f"healthy brokers fenced (offset, broker): {healthy}"
    assert len(fences) <= 1, f"broker {victim} fenced more than once: {fences}"

    assert producer.errors == [], producer.errors[:5]
    report = check(producer.acked, _read_to_end(cluster.bootstrap, WAIT_S))
    assert report.ok, report.summary()
    print(f"{len(producer.acked)} acknowledged records read back")
