"""Log in with an old client release, produce `count` records, read them back in a group.

Run by tests/integration/old_clients.py inside the old client's own venv (so it imports
nothing from rillet or tests):  python old_client_login.py CLIENT JOB_JSON
CLIENT is kafka-python or confluent-kafka; JOB_JSON holds bootstrap, mechanism, user,
password, topic, group, count. Prints one JSON line: ok, the client's version, what its
consumer group read back and committed, and the errors the client reported.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any

TIMEOUT_S = 30


def kafka_python(job: dict[str, Any]) -> dict[str, Any]:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    auth = {"bootstrap_servers": job["bootstrap"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": job["mechanism"], "sasl_plain_username": job["user"],
            "sasl_plain_password": job["password"]}
    values = [f"kafka-python-{i}".encode() for i in range(job["count"])]
    producer = KafkaProducer(acks="all", **auth)
    for value in values:
        producer.send(job["topic"], value, partition=0).get(timeout=TIMEOUT_S)
    producer.close()
    # A consumer group (FindCoordinator, JoinGroup, SyncGroup, OffsetCommit/Fetch at the
    # versions this release sends), reading from the start and committing what it read.
    consumer = KafkaConsumer(job["topic"], group_id=job["group"], auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=1000, **auth)
    got: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < len(values) and time.monotonic() < deadline:
        got += [m.value.decode() for m in consumer]
    consumer.commit()
    committed = consumer.committed(TopicPartition(job["topic"], 0))
    consumer.close()
    return {"ok": True, "version": kafka.__version__, "read": got, "committed": committed}


def confluent(job: dict[str, Any]) -> dict[str, Any]:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    errors: list[str] = []
    auth = {"bootstrap.servers": job["bootstrap"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": job["mechanism"], "sasl.username": job["user"],
            "sasl.password": job["password"], "error_cb": lambda e: errors.append(str(e))}
    version = confluent_kafka.libversion()[0]
    values = [f"librdkafka-{i}".encode() for i in range(job["count"])]
    failed: list[str] = []
    producer = Producer({**auth, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    for value in values:
        producer.produce(job["topic"], value, partition=0,
                         on_delivery=lambda err, _: failed.append(str(err)) if err else None)
    # Poll rather than flush: a refused login shows in error_cb at once, no need to wait
    # for the message timeout.
    deadline = time.monotonic() + TIMEOUT_S
    while len(producer) and not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    left = len(producer)
    if left or failed or errors:
        return {"ok": False, "version": version, "errors": errors + failed,
                "undelivered": left}
    # A consumer group, as above for kafka-python.
    consumer = Consumer({**auth, "group.id": job["group"], "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([job["topic"]])
    got: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value().decode())
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(job["topic"], 0)], TIMEOUT_S)[0].offset
    consumer.close()
    return {"ok": not errors, "version": version, "read": got, "errors": errors,
            "committed": committed}


def main() -> None:
    client, job = sys.argv[1], json.loads(sys.argv[2])
    try:
        report = kafka_python(job) if client == "kafka-python" else confluent(job)
    except Exception as exc:  # the test shows what the client raised
        report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
