"""Why the kafka-python 3.0.12 stall of issue 27 lasts for good, in one bounded run.

    python -m tests.kafka_python_unknown_leader DIR

One rillet broker, an idempotent acks=all kafka-python producer that has sent and flushed.
Its metadata is then made to name, for one partition, a leader that is not in its brokers
list: what rillet's Metadata answered, before issue 27's fix, for a partition whose leader
had just been fenced (in the moment between the controller's two commits). The producer's
sender thread then calls maybe_connect(leader); get_connection raises UnknownBrokerIdError,
which only NodeNotReadyError is caught around, so run_once ends before client.poll(). That
poll is what drives kafka-python's network loop, metadata refresh included, so the wrong
leader is never replaced: every later run_once fails the same way ("Uncaught error in kafka
producer I/O thread"), and flush() never ends. Apache Kafka answers such a partition with
leader -1 (LEADER_NOT_AVAILABLE), which kafka-python treats as an unknown leader and refreshes.

Prints what it saw; exit code 0 when the producer stalled as described (the client's
behaviour is shown), 1 when it recovered.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from kafka import KafkaProducer
from kafka.structs import TopicPartition

from rillet.client.admin import AdminClient
from tests.harness import BrokerProcess

TOPIC = "stall"
WAIT_S = 20.0


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.uncaught = 0
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        if "Uncaught error" in record.getMessage():
            self.uncaught += 1
            self.last = repr(record.exc_info[1]) if record.exc_info else ""


def run(root: Path) -> bool:
    """True when the producer stalled for good on a leader it has no address of."""
    broker = BrokerProcess(root / "node", config={"offsets.topic.num.partitions": 1})
    count = _Count()
    logging.getLogger("kafka.producer.sender").addHandler(count)
    broker.start()
    try:
        async def create() -> None:
            async with AdminClient(broker.bootstrap, timeout=15) as admin:
                await admin.create_topic(TOPIC, 1, 1)
        asyncio.run(create())
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                 enable_idempotence=True, linger_ms=5)
        try:
            for i in range(10):
                producer.send(TOPIC, b"%d" % i)
            producer.flush(timeout=30)
            tp = TopicPartition(TOPIC, 0)
            cluster = producer._metadata
            epoch = cluster.leader_epoch_for_partition(tp)
            print(f"before: leader {cluster.leader_for_partition(tp)} epoch {epoch}, "
                  f"brokers {[b.node_id for b in cluster.brokers()]}")
            cluster.update_partition_leader(tp, 7, epoch + 1)   # 7: not in the brokers list
            cluster.request_update()
            producer.send(TOPIC, b"after")
            started = time.monotonic()
            try:
                producer.flush(timeout=WAIT_S)
                stalled = False
            except Exception as exc:   # kafka-python's KafkaTimeoutError
                stalled = True
                print(f"flush: {exc!r} after {time.monotonic() - started:.0f} s")
            print(f"after {WAIT_S:.0f} s: leader in its metadata {cluster.leader_for_partition(tp)}"
                  f" (the broker's: 1); 'Uncaught error' logged {count.uncaught} times, last "
                  f"{count.last}")
            return stalled and cluster.leader_for_partition(tp) == 7
        finally:
            try:
                producer.close(timeout=2)
            except Exception as exc:   # its flush cannot end either
                print(f"close: {exc!r}")
    finally:
        broker.kill()


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print(__doc__)
        return 2
    return 0 if run(Path(args[0])) else 1


if __name__ == "__main__":
    sys.exit(main())
