"""librdkafka 2.0.2 (the client that met issue 33) uses a topic at once through other nodes.

Run by tests/integration/test_metadata_propagation.py inside the old client's own venv (so it
imports nothing from rillet or tests):  python old_client_at_once.py JOB_JSON
JOB_JSON holds create_via (one node's address), others (the other nodes' addresses), topic,
partitions, group, count. Creates the topic through create_via; right after, produces `count`
records through each other node (its only bootstrap), then through each a consumer group
reads every record, commits, and queries the committed and end offsets (ListOffsets). Prints
one JSON line: the client's version, the errors that reached the application, and per node
what its group read, committed and saw as end offsets.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any

TIMEOUT_S = 30


def _final(errors: list[str], where: str) -> Any:
    """An error_cb keeping what the application must act on (fatal or not retriable)."""
    return lambda e: errors.append(f"{where}: {e}") if e.fatal() or not e.retriable() else None


def _produce(address: str, job: dict[str, Any], errors: list[str]) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": address, "linger.ms": 5,
                         "error_cb": _final(errors, f"producer {address}")})
    for i in range(job["count"]):
        producer.produce(job["topic"], key=f"k{i}".encode(), value=f"v{i}".encode(),
                         on_delivery=lambda err, _m: errors.append(f"delivery via {address}: "
                                                                   f"{err}") if err else None)
    left = producer.flush(TIMEOUT_S)
    if left:
        errors.append(f"{left} records undelivered via {address}")


def _group(address: str, group: str, total: int, job: dict[str, Any],
           errors: list[str]) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": address, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "error_cb": _final(errors, f"consumer {address}")})
    try:
        consumer.subscribe([job["topic"]])
        consumed = 0
        deadline = time.monotonic() + TIMEOUT_S
        while consumed < total and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(f"poll via {address}: {msg.error()}")
            elif msg is not None:
                consumed += 1
        for tp in consumer.commit(asynchronous=False) or []:
            if tp.error is not None:
                errors.append(f"commit via {address}: {tp.topic}-{tp.partition}: {tp.error}")
        tps = [TopicPartition(job["topic"], p) for p in range(job["partitions"])]
        committed = sum(tp.offset for tp in consumer.committed(tps, timeout=TIMEOUT_S))
        ends = sum(consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)[1] for tp in tps)
        return {"consumed": consumed, "committed": committed, "ends": ends}
    finally:
        consumer.close()


def run(job: dict[str, Any]) -> dict[str, Any]:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic
    errors: list[str] = []
    admin = AdminClient({"bootstrap.servers": job["create_via"]})
    admin.create_topics([NewTopic(job["topic"], job["partitions"], 3)]
                        )[job["topic"]].result(TIMEOUT_S)
    for address in job["others"]:
        _produce(address, job, errors)
    total = job["count"] * len(job["others"])
    nodes = {address: _group(address, f"{job['group']}-{i}", total, job, errors)
             for i, address in enumerate(job["others"])}
    return {"version": confluent_kafka.libversion()[0], "errors": errors, "nodes": nodes}


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        report = run(job)
    except Exception as exc:  # the test shows what the client raised
        report = {"errors": [f"{type(exc).__name__}: {exc}"]}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
