"""In-cluster Kafka client for the e2e tests, printing one JSON line: kafka-python, but
confluent-kafka for the stream's producer and its read-back (see `stream`).

  client.py inspect BOOTSTRAP TOPIC [--full-isr SECONDS]
      brokers (id -> rack) and the topic's partitions (replicas, isr); with --full-isr, waits
      up to SECONDS until every partition's ISR equals its replicas.
  client.py produce-consume BOOTSTRAP TOPIC COUNT
      produces COUNT records with acks=all (a failed send fails the Job with its error), then
      consumes the topic from the beginning in a group and reports how many of them it read
      back.
  client.py stream BOOTSTRAP TOPIC RATE MAX_SECONDS
      produces records "seq-<i>" with acks=all and idempotence at RATE per second until a
      topic named TOPIC-stop exists (or MAX_SECONDS passed), then reads the topic back and
      reports failed deliveries, records missing and records seen twice.
  client.py fill BOOTSTRAP TOPIC COUNT SIZE
      produces COUNT records of SIZE bytes as fast as it can (acks=all), for data to move.
  client.py produce-rate BOOTSTRAP TOPIC SECONDS SIZE
      produces records of SIZE bytes as fast as it can for SECONDS (confluent-kafka, acks=1),
      then reports the bytes acknowledged, the seconds they took and the largest throttle
      time the brokers answered (client quotas).
  client.py broker-config BOOTSTRAP BROKER KEY
      the value broker BROKER reports for config KEY (DescribeConfigs).
  client.py count BOOTSTRAP TOPIC
      reads every partition from the beginning to its end offset (no group) and reports the
      number of records.
  client.py topics BOOTSTRAP
      the names of every topic the cluster has.
  client.py access BOOTSTRAP TOPIC
      tries to produce one record; reports "ok" or the error (a refusal is a result here).

Security from the environment (a rillet User's Secret, as a Job would mount it):
KAFKA_SECURITY_PROTOCOL (SSL, SASL_SSL, ...), KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD
(SCRAM-SHA-512), KAFKA_SSL_CAFILE (the cluster CA), KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE
(a tls User's certificate); KAFKA_GROUP_PREFIX names the consumer groups (default e2e-).
"""
import faulthandler
import json
import os
import sys
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError, KafkaTimeoutError


def _security():
    """kafka-python's security settings from the environment (none: PLAINTEXT)."""
    env = os.environ
    out = {}
    if env.get("KAFKA_SECURITY_PROTOCOL"):
        out["security_protocol"] = env["KAFKA_SECURITY_PROTOCOL"]
    if env.get("KAFKA_SASL_USERNAME"):
        out.update(sasl_mechanism="SCRAM-SHA-512",
                   sasl_plain_username=env["KAFKA_SASL_USERNAME"],
                   sasl_plain_password=env.get("KAFKA_SASL_PASSWORD", ""))
    for key, name in (("ssl_cafile", "KAFKA_SSL_CAFILE"), ("ssl_certfile", "KAFKA_SSL_CERTFILE"),
                      ("ssl_keyfile", "KAFKA_SSL_KEYFILE")):
        if env.get(name):
            out[key] = env[name]
    return out


def _confluent_security():
    """The same for confluent-kafka (librdkafka names)."""
    names = {"security_protocol": "security.protocol", "sasl_mechanism": "sasl.mechanisms",
             "sasl_plain_username": "sasl.username", "sasl_plain_password": "sasl.password",
             "ssl_cafile": "ssl.ca.location", "ssl_certfile": "ssl.certificate.location",
             "ssl_keyfile": "ssl.key.location"}
    return {names[k]: v for k, v in _security().items()}


SEC = _security()
GROUP_PREFIX = os.environ.get("KAFKA_GROUP_PREFIX", "e2e-")


def _get(d, *keys):
    for k in keys:
        if k in d:
            return d[k]
    raise KeyError(f"none of {keys} in {sorted(d)}")


def _describe(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SEC, request_timeout_ms=20000)
    try:
        cluster = admin.describe_cluster()
        (desc,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return cluster, desc


def inspect(bootstrap, topic, full_isr_s=0.0):
    deadline = time.monotonic() + full_isr_s
    while True:
        try:
            cluster, desc = _describe(bootstrap, topic)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            # A broker pod just replaced keeps its DNS name, but CoreDNS may answer its old
            # address for its cache time (15 s here): a client retries, as Kafka's own do.
            if time.monotonic() > deadline:
                raise
            print(f"inspect: {e!r}; again", file=sys.stderr, flush=True)
            time.sleep(1)
            continue
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
            "controller": cluster.get("controller_id"),
            "partitions": parts, "full_isr": full}


def produce_consume(bootstrap, topic, count):
    producer = KafkaProducer(bootstrap_servers=bootstrap, **SEC, acks="all", retries=10,
                             request_timeout_ms=30000)
    payloads = [f"msg-{i}-{uuid.uuid4().hex}".encode() for i in range(count)]
    futures = [producer.send(topic, key=str(i).encode(), value=value)
               for i, value in enumerate(payloads)]
    producer.flush(60)
    for f in futures:
        f.get(timeout=60)  # raises the delivery error instead of counting it as lost later
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, **SEC,
                             group_id=f"{GROUP_PREFIX}{uuid.uuid4().hex[:6]}",
                             auto_offset_reset="earliest", enable_auto_commit=True,
                             consumer_timeout_ms=5000)
    wanted, seen = set(payloads), set()
    deadline = time.monotonic() + 90
    while wanted - seen and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=2000).values():
            seen.update(r.value for r in batch)
    consumer.close()
    return {"produced": count, "consumed_back": len(wanted & seen)}


def stream(bootstrap, topic, rate, max_s):
    """acks=all idempotent records at `rate` per second until the topic <topic>-stop exists,
    then every record read back: how many failed, went missing or came twice.

    The producer is confluent-kafka (librdkafka): kafka-python 3.0.12's producer stalled for
    good (flush never completed) after brokers it knew were removed by a scale-down, see the
    README's known limits."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_confluent_security(),
                         "enable.idempotence": True, "delivery.timeout.ms": 300000,
                         "linger.ms": 5})
    failed, sent = [], 0

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(repr(err))

    started = time.monotonic()
    next_check = started
    stop_topic = f"{topic}-stop"
    stopped_by = "time"
    while time.monotonic() - started < max_s:
        now = time.monotonic()
        if now >= next_check:
            if _has_topic(producer, stop_topic):
                print(f"stream: {stop_topic} exists after {now - started:.0f} s; {sent} sent",
                      flush=True)
                stopped_by = "topic"
                break
            next_check = now + 2
            print(f"stream: {sent} sent, {len(failed)} failed", flush=True)
        due = int((now - started) * rate) + 1
        while sent < due:
            producer.produce(topic, key=str(sent % 64).encode(), value=f"seq-{sent}".encode(),
                             on_delivery=on_delivery)
            sent += 1
        producer.poll(0.01)
    # The flush and the read-back are bounded; should a client call still hang, every thread's
    # stack goes to the Job's log and the Job fails, well before the test stops waiting.
    faulthandler.dump_traceback_later(330 + 240, exit=True)
    flush_started = time.monotonic()
    left = producer.flush(330)
    print(f"stream: flushed in {time.monotonic() - flush_started:.0f} s, {left} left, "
          f"{len(failed)} failed", flush=True)
    if left:
        failed.append(f"{left} never acknowledged")
    seen = {}
    for value in _read_back(bootstrap, topic):
        seen[value] = seen.get(value, 0) + 1
    faulthandler.cancel_dump_traceback_later()
    wanted = {f"seq-{i}".encode() for i in range(sent)}
    return {"sent": sent, "failed": len(failed), "failures": failed[:5],
            "missing": len(wanted - set(seen)), "duplicates": sum(c - 1 for c in seen.values()),
            "seconds": round(time.monotonic() - started), "stopped_by": stopped_by}


def fill(bootstrap, topic, count, size):
    producer = KafkaProducer(bootstrap_servers=bootstrap, **SEC, acks="all", linger_ms=20,
                             batch_size=256 * 1024, compression_type=None)
    started = time.monotonic()
    payload = b"x" * size
    futures = [producer.send(topic, value=payload) for _ in range(count)]
    producer.flush(600)
    for f in futures:
        f.get(timeout=60)
    producer.close()
    return {"records": count, "bytes": count * size,
            "seconds": round(time.monotonic() - started, 1)}


def produce_rate(bootstrap, topic, seconds, size):
    from confluent_kafka import Producer
    acked, failed, throttle = [0], [], [0]

    def on_stats(raw):
        for b in json.loads(raw).get("brokers", {}).values():
            throttle[0] = max(throttle[0], (b.get("throttle") or {}).get("max", 0))

    def on_delivery(err, msg):
        if err is not None:
            failed.append(repr(err))
        else:
            acked[0] += len(msg.value())

    # Small batches: a quota averages over its window, and one request larger than a
    # window's worth is let through whole once the window has emptied.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", **_confluent_security(),
                         "linger.ms": 5, "batch.size": 16384, "statistics.interval.ms": 500,
                         "stats_cb": on_stats, "queue.buffering.max.kbytes": 256})
    payload = b"x" * size
    started = time.monotonic()
    while time.monotonic() < started + seconds:
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    took = time.monotonic() - started
    producer.poll(1.0)   # a last statistics report
    return {"bytes": acked[0], "seconds": round(took, 2), "failed": failed[:3],
            "throttle_ms_max": throttle[0]}


def broker_config(bootstrap, broker, key):
    from kafka.admin import ConfigResource, ConfigResourceType
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SEC, request_timeout_ms=20000)
    try:
        got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker)],
                                     config_filter="all")
    finally:
        admin.close()
    entry = (got.get("broker") or {}).get(broker, {}).get(key)
    return {"key": key, "entry": entry}


def _has_topic(producer, name):
    """Whether the topic exists (all topics are listed: naming it could auto-create it). A
    check that fails while brokers restart or move is asked again at the next one."""
    try:
        return name in producer.list_topics(timeout=10).topics
    except Exception as exc:  # noqa: BLE001 - any failure is "not known yet"
        print(f"stream: stop check failed ({exc!r}); retrying", flush=True)
        return False


def _read_all(bootstrap, topic):
    from kafka import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **SEC, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    ends = consumer.end_offsets(parts, timeout_ms=30000)
    print(f"read {topic}: end offsets {ends}", flush=True)
    deadline = time.monotonic() + 120

    def behind():
        # position() without a timeout may wait forever on a ListOffsets it keeps retrying.
        positions = {tp.partition: consumer.position(tp, timeout_ms=5000) for tp in parts}
        return {p: o for p, o in positions.items() if o is None or o < ends[TopicPartition(
            topic, p)]}
    while (lagging := behind()) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=2000).values():
            for r in batch:
                yield r.value
    if lagging:
        print(f"read {topic}: gave up at positions {lagging}", flush=True)
    consumer.close()


def _read_back(bootstrap, topic):
    """The stream's check: every record up to the end offsets, with librdkafka, whose every
    wait is bounded. kafka-python 3.0.12 has waits that are not: its TLS handshake has no
    timer, and its metadata refresh loop ends for good on an exception that is not a
    KafkaError, after which partitions_for_topic() waits forever. In one CI run the stream
    Job never finished after the renewal roll, and where it waited was not recorded."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
    from confluent_kafka import TopicPartition as Tp
    consumer = Consumer({"bootstrap.servers": bootstrap, **_confluent_security(),
                         "group.id": f"{GROUP_PREFIX}check-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(Tp(topic, p), timeout=30)[1]
                for p in partitions}
        print(f"read {topic}: end offsets {ends}", flush=True)
        consumer.assign([Tp(topic, p, OFFSET_BEGINNING) for p in partitions])
        next_offset = {p: 0 for p in partitions}
        deadline = time.monotonic() + 120
        while any(next_offset[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1):
                if msg.error() is None:
                    next_offset[msg.partition()] = msg.offset() + 1
                    if msg.offset() < ends[msg.partition()]:
                        yield msg.value()
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    next_offset[msg.partition()] = max(next_offset[msg.partition()],
                                                       msg.offset())
                else:
                    print(f"read {topic}: {msg.error()}", flush=True)
        lagging = {p: o for p, o in next_offset.items() if o < ends[p]}
        if lagging:
            print(f"read {topic}: gave up at offsets {lagging}", flush=True)
    finally:
        consumer.close()


def count(bootstrap, topic):
    n = sum(1 for _ in _read_all(bootstrap, topic))
    return {"records": n, "end_offsets": _end_offsets(bootstrap, topic)}


def _end_offsets(bootstrap, topic):
    from kafka import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **SEC)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        return sum(consumer.end_offsets(parts).values())
    finally:
        consumer.close()


def topics(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SEC, request_timeout_ms=20000)
    try:
        return {"topics": sorted(admin.list_topics())}
    finally:
        admin.close()


def access(bootstrap, topic):
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, **SEC, acks="all", retries=0,
                                 request_timeout_ms=15000, max_block_ms=20000)
        try:
            producer.send(topic, b"probe").get(timeout=30)
        finally:
            producer.close(timeout=5)
        return {"produce": "ok"}
    except Exception as exc:  # noqa: BLE001 - the refusal is what is reported
        return {"produce": f"{type(exc).__name__}: {exc}"}


def main(argv):
    if argv[0] == "inspect":
        full = float(argv[4]) if len(argv) > 4 and argv[3] == "--full-isr" else 0.0
        out = inspect(argv[1], argv[2], full)
    elif argv[0] == "produce-consume":
        out = produce_consume(argv[1], argv[2], int(argv[3]))
    elif argv[0] == "stream":
        out = stream(argv[1], argv[2], float(argv[3]), float(argv[4]))
    elif argv[0] == "fill":
        out = fill(argv[1], argv[2], int(argv[3]), int(argv[4]))
    elif argv[0] == "produce-rate":
        out = produce_rate(argv[1], argv[2], float(argv[3]), int(argv[4]))
    elif argv[0] == "broker-config":
        out = broker_config(argv[1], argv[2], argv[3])
    elif argv[0] == "count":
        out = count(argv[1], argv[2])
    elif argv[0] == "topics":
        out = topics(argv[1])
    elif argv[0] == "access":
        out = access(argv[1], argv[2])
    else:
        sys.exit(f"unknown command {argv[0]!r}")
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
