"""In-cluster Kafka client for the e2e tests (kafka-python), printing one JSON line.

  client.py inspect BOOTSTRAP TOPIC [--full-isr SECONDS]
      brokers (id -> rack) and the topic's partitions (replicas, isr); with --full-isr, waits
      up to SECONDS until every partition's ISR equals its replicas.
  client.py produce-consume BOOTSTRAP TOPIC COUNT
      produces COUNT records with acks=all (a failed send fails the Job with its error), then
      consumes the topic from the beginning in a group and reports how many of them it read
      back.
  client.py count BOOTSTRAP TOPIC
      reads every partition from the beginning to its end offset (no group) and reports the
      number of records.
"""
import json
import sys
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient


def _get(d, *keys):
    for k in keys:
        if k in d:
            return d[k]
    raise KeyError(f"none of {keys} in {sorted(d)}")


def inspect(bootstrap, topic, full_isr_s=0.0):
    deadline = time.monotonic() + full_isr_s
    while True:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
        try:
            cluster = admin.describe_cluster()
            (desc,) = admin.describe_topics([topic])
        finally:
            admin.close()
        # kafka-python names fields as the protocol does (partition_index, replica_nodes...).
        parts = {_get(p, "partition_index", "partition"): {
            "replicas": _get(p, "replica_nodes", "replicas"), "isr": _get(p, "isr_nodes", "isr"),
            "leader": _get(p, "leader_id", "leader")} for p in desc["partitions"]}
        full = all(sorted(p["replicas"]) == sorted(p["isr"]) for p in parts.values())
        if full or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {"brokers": {_get(b, "broker_id", "node_id"): b.get("rack")
                        for b in cluster["brokers"]},
            "partitions": parts, "full_isr": full}


def produce_consume(bootstrap, topic, count):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10,
                             request_timeout_ms=30000)
    payloads = [f"msg-{i}-{uuid.uuid4().hex}".encode() for i in range(count)]
    futures = [producer.send(topic, key=str(i).encode(), value=value)
               for i, value in enumerate(payloads)]
    producer.flush(60)
    for f in futures:
        f.get(timeout=60)  # raises the delivery error instead of counting it as lost later
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"e2e-{uuid.uuid4().hex[:6]}",
                             auto_offset_reset="earliest", enable_auto_commit=True,
                             consumer_timeout_ms=5000)
    wanted, seen = set(payloads), set()
    deadline = time.monotonic() + 90
    while wanted - seen and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=2000).values():
            seen.update(r.value for r in batch)
    consumer.close()
    return {"produced": count, "consumed_back": len(wanted & seen)}


def count(bootstrap, topic):
    from kafka import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    ends = consumer.end_offsets(parts)
    n, deadline = 0, time.monotonic() + 90
    while any(consumer.position(tp) < ends[tp] for tp in parts) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=2000).values():
            n += len(batch)
    consumer.close()
    return {"records": n, "end_offsets": sum(ends.values())}


def main(argv):
    if argv[0] == "inspect":
        full = float(argv[4]) if len(argv) > 4 and argv[3] == "--full-isr" else 0.0
        out = inspect(argv[1], argv[2], full)
    elif argv[0] == "produce-consume":
        out = produce_consume(argv[1], argv[2], int(argv[3]))
    elif argv[0] == "count":
        out = count(argv[1], argv[2])
    else:
        sys.exit(f"unknown command {argv[0]!r}")
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
