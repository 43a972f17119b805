"""Idempotent producers: retries after lost responses never duplicate records."""
from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import Producer

from tests.harness import BrokerProcess, free_port

from .clients import confluent_consume, create_topic
from .proxy import DroppingProxy, LostResponse
from ..wire import Wire


def test_retries_through_lost_responses_leave_no_duplicates(tmp_path: Path) -> None:
    topic = f"idem-{uuid.uuid4().hex[:6]}"
    proxy_port = free_port()
    # Metadata must point the producer at the proxy, so the broker advertises it.
    broker = BrokerProcess(tmp_path / "data", config={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}).start()
    proxy = DroppingProxy("127.0.0.1", broker.port, drop_every=4, max_drops=4,
                          port=proxy_port)
    create_topic(proxy.bootstrap, topic, partitions=1)
    errors: list = []
    try:
        p = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True,
                      "linger.ms": 2, "batch.num.messages": 20,
                      "message.timeout.ms": 30000, "socket.timeout.ms": 2000,
                      "client.dns.lookup": "use_all_dns_ips"})
        for i in range(400):
            p.produce(topic, key=b"k", value=str(i).encode(),
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
            if i % 20 == 0:
                p.flush(10)
        assert p.flush(60) == 0
        assert errors == []
        assert _appended_but_unacked(proxy.lost) > 0, (
            f"none of the {proxy.dropped} lost produce responses acknowledged an append: "
            "no retry could have been a duplicate, the test proved nothing")
        got = confluent_consume(proxy.bootstrap, topic, 1, 400)
        assert [int(m.value) for m in got] == list(range(400))
    finally:
        proxy.close()
        broker.stop()


def _appended_but_unacked(lost: list[LostResponse]) -> int:
    """How many swallowed produce responses told of a successful append."""
    from rillet.protocol.codec import decode_response
    count = 0
    for response in lost:
        _, resp = decode_response(0, response.api_version, response.frame)
        codes = [p.error_code for t in resp.responses for p in t.partition_responses]
        count += all(code == 0 for code in codes)
    return count


def test_out_of_order_sequence_is_rejected(broker: BrokerProcess) -> None:
    from rillet.records import Record, encode_batch
    topic = f"seq-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    with Wire(broker.bootstrap) as w:
        pid = w.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                "producer_id": -1, "producer_epoch": -1})
        assert pid.error_code == 0 and pid.producer_id >= 0

        def send(seq: int) -> int:
            batch = encode_batch([Record(offset=0, timestamp=1, key=None, value=b"v",
                                         headers=[])],
                                 producer_id=pid.producer_id,
                                 producer_epoch=pid.producer_epoch, base_sequence=seq)
            resp = w.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            return resp.responses[0].partition_responses[0]

        first = send(0)
        assert first.error_code == 0 and first.base_offset == 0
        dup = send(0)
        assert dup.error_code == 0 and dup.base_offset == 0  # duplicate: original offset
        gap = send(5)
        assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(1).base_offset == 1
