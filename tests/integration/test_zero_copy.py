"""Zero-copy Fetch (issue 25) on a real broker and real sockets: a plaintext listener sends
records with sendfile, a TLS listener of the same broker copies them; a client sees the
same bytes from both, for every Fetch version served, pipelined requests stay in order, and
consumers read back exactly what was produced. The frame writer on a loopback socket: what
sendfile sends is what a copy would, and a file cut short fails the frame."""
from __future__ import annotations

import asyncio
import io
import os
import socket
import ssl
import struct
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import trustme

from rillet.protocol.build import build
from rillet.frame_writer import SENDFILE_MIN_BYTES, write_frame
from rillet.protocol.codec import decode_response, encode_request, request_schema
from rillet.protocol.file_records import FileRange, ShortFile, SplicedFrame
from rillet.records import Record, decode_records, encode_batch, parse_batches
from tests.harness import BrokerProcess, free_port, listening
from tests.wire import Wire

from .clients import (confluent_consume, confluent_produce, create_topic, kafka_python_consume,
                      make_records)

pytestmark = pytest.mark.timeout(300)
PARTITIONS = 3
BATCHES = 12   # per partition, of about 40 KB each: fetches far above the copy threshold


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    ca = trustme.CA(organization_name="rillet zero-copy test CA")
    d = tmp_path_factory.mktemp("pki")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", common_name="broker") \
        .private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
    yield d / "ca.pem", d / "broker.pem"


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory,
                  ca_file: tuple[Path, Path]) -> Iterator[tuple[BrokerProcess, int]]:
    """One broker, a PLAINTEXT and an SSL listener; small segments, so reads meet rolls."""
    ssl_port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("zc") / "data", ready=listening, config={
        "ssl.keystore.location": str(ca_file[1]), "log.segment.bytes": "200000"})
    b.config["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{ssl_port}"
    b.start()
    try:
        yield b, ssl_port
    finally:
        b.stop()


def _batch(partition: int, i: int) -> bytes:
    return encode_batch([Record(offset=j, timestamp=1_700_000_000_000 + j, key=b"k%d" % j,
                                value=(b"p%d-b%d-r%d-" % (partition, i, j)) * 400, headers=[])
                         for j in range(5)])


def _produce(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Wire(bootstrap, timeout=30) as w:
        for i in range(BATCHES):
            data = [{"index": p, "records": _batch(p, i)} for p in range(PARTITIONS)]
            resp = w.request(0, 9, {"acks": -1, "timeout": 10000, "topic_data": [
                {"name": topic, "partition_data": data}]})
            assert all(r.error_code == 0 for r in resp.responses[0].partition_responses)
            for p in range(PARTITIONS):
                sent[p].append(data[p]["records"])
    return sent


def _fetch_frame(version: int, topic: str, offsets: dict[int, int], *, max_bytes: int,
                 isolation: int = 0, correlation: int = 7) -> bytes:
    body = build(request_schema(1, version), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": o, "partition_max_bytes": 300_000,
             "current_leader_epoch": -1, "log_start_offset": -1}
            for p, o in offsets.items()]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return encode_request(1, version, correlation, "zero-copy-test", body)


class TlsWire(Wire):
    def __init__(self, bootstrap: str, ca: Path) -> None:
        super().__init__(bootstrap, timeout=30)
        context = ssl.create_default_context(cafile=str(ca))
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")


def _exchange(wire: Wire, frames: list[bytes]) -> list[bytes]:
    """Send all frames before reading any answer (pipelined); the raw answers in order."""
    wire.send_raw(b"".join(frames))
    return [wire.recv_frame() for _ in frames]


@pytest.mark.parametrize("version", range(4, 13))
def test_plaintext_sendfile_and_tls_copy_answer_the_same_bytes(
        two_listeners: tuple[BrokerProcess, int], ca_file: tuple[Path, Path],
        version: int) -> None:
    broker, ssl_port = two_listeners
    topic = f"zc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    sent = _produce(broker.bootstrap, topic)
    # whole partitions, a few batches, one batch over the budget (KIP-74), read_committed,
    # a small answer (copied below the threshold), past the end
    offsets = {p: 0 for p in range(PARTITIONS)}
    frames = [_fetch_frame(version, topic, offsets, max_bytes=50 << 20),
              _fetch_frame(version, topic, {p: 5 * p + 3 for p in range(PARTITIONS)},
                           max_bytes=100_000),
              _fetch_frame(version, topic, {1: 7}, max_bytes=1),
              _fetch_frame(version, topic, offsets, max_bytes=50 << 20, isolation=1),
              _fetch_frame(version, topic, {2: 5 * BATCHES}, max_bytes=1 << 20)]
    with Wire(broker.bootstrap, timeout=30) as plain, \
            TlsWire(f"127.0.0.1:{ssl_port}", ca_file[0]) as tls:
        plain_answers = _exchange(plain, frames)
        tls_answers = _exchange(tls, frames)
    assert [len(a) for a in plain_answers] == [len(a) for a in tls_answers]
    assert plain_answers == tls_answers
    assert len(plain_answers[0]) > 400_000   # the records went out of the files
    _, whole = decode_response(1, version, plain_answers[0])
    got = {p.partition_index: p.records for p in whole.responses[0].partitions}
    for p in range(PARTITIONS):
        records = got[p]
        headers = parse_batches(records)
        assert [h.base_offset for h in headers][:1] == [0]
        # the batches as produced (offsets assigned), CRC-checked by decode_records
        values = [r.value for h in headers
                  for r in decode_records(records[h.position:h.position + h.size])[1]]
        want = [r.value for b in sent[p][:len(headers)] for r in decode_records(b)[1]]
        assert values == want


def test_pipelined_fetches_answer_in_request_order(
        two_listeners: tuple[BrokerProcess, int]) -> None:
    broker, _ = two_listeners
    topic = f"zc-order-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    _produce(broker.bootstrap, topic)
    frames: list[bytes] = []
    for n in range(30):
        frames.append(_fetch_frame(12, topic, {n % PARTITIONS: n % 40}, max_bytes=1 << 20,
                                   correlation=1000 + n))
        if n % 3 == 0:   # small answers in between: bytes and sendfile interleave
            frames.append(encode_request(18, 3, 5000 + n, "zero-copy-test",
                                         build(request_schema(18, 3), {})))
    with Wire(broker.bootstrap, timeout=30) as w:
        answers = _exchange(w, frames)
    correlations = [struct.unpack_from(">i", a)[0] for a in answers]
    assert correlations == [struct.unpack_from(">i", f, 8)[0] for f in frames]
    for frame, answer in zip(frames, answers):
        if struct.unpack_from(">h", frame, 4)[0] == 1:
            _, body = decode_response(1, 12, answer)
            part = body.responses[0].partitions[0]
            assert part.error_code == 0 and parse_batches(part.records)


@pytest.mark.parametrize("consume", [confluent_consume, kafka_python_consume])
def test_consumers_read_everything_produced(two_listeners: tuple[BrokerProcess, int],
                                            consume: Any) -> None:
    broker, _ = two_listeners
    topic = f"zc-clients-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    records = make_records(3000, 1_700_000_000_000, value_size=900)
    # batches below the small segments (log.segment.bytes above)
    assert confluent_produce(broker.bootstrap, topic, records, "none", "all",
                             {"batch.size": 150_000}) == []
    got = consume(broker.bootstrap, topic, PARTITIONS, len(records), timeout=60)
    assert sorted(m.value for m in got) == sorted(r["value"] for r in records)


def _frame_of(path: Path, spans: list[bytes | tuple[int, int]]) -> SplicedFrame:
    parts: list[Any] = [s if isinstance(s, bytes)
                        else FileRange(io.FileIO(str(path), "rb"), s[0], s[1]) for s in spans]
    return SplicedFrame(parts, sum(len(p) if isinstance(p, bytes) else p.length for p in parts))


async def _received(frame: SplicedFrame, send_buffer: int | None = None
                    ) -> tuple[bytes, BaseException | None]:
    """What a peer receives of ``frame`` written with sendfile on a loopback socket, and what
    the writer raised. ``send_buffer``: the writer's SO_SNDBUF (and the peer's SO_RCVBUF)."""
    raised: list[BaseException | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if send_buffer is not None:
                writer.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            await write_frame(writer, frame, sendfile=True)
            raised.append(None)
        except Exception as exc:
            raised.append(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sock = socket.socket()
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, send_buffer)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    data = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    server.close()
    await server.wait_closed()
    return data, raised[0]


def _count_sendfile(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """(bytes each os.sendfile moved, counts asked of loop.sendfile), as they happen."""
    import asyncio.base_events
    kernel: list[int] = []
    looped: list[int] = []
    real_os = os.sendfile
    real_loop = asyncio.base_events.BaseEventLoop.sendfile

    def counted_os(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sent = real_os(out_fd, in_fd, offset, count)
        kernel.append(sent)
        return sent

    async def counted_loop(self, transport, file, offset=0, count=None, **kw):
        looped.append(count)
        return await real_loop(self, transport, file, offset, count, **kw)
    monkeypatch.setattr(os, "sendfile", counted_os)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "sendfile", counted_loop)
    return kernel, looped


def test_write_frame_sends_with_sendfile_what_materialise_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, _ = _count_sendfile(monkeypatch)
    path = tmp_path / "segment.log"
    content = os.urandom(3 << 20)
    path.write_bytes(content)
    spans: list[bytes | tuple[int, int]] = [
        b"\0\0\0\x10head", (10, 100), b"mid", (5000, 1 << 20), (0, SENDFILE_MIN_BYTES),
        b"", (2 << 20, 700_000), (7, SENDFILE_MIN_BYTES - 1), b"tail"]
    want = _frame_of(path, spans).materialise()
    frame = _frame_of(path, spans)
    data, raised = asyncio.run(_received(frame))
    assert raised is None and data == want
    assert all(p.file.closed for p in frame.parts if isinstance(p, FileRange))
    # The large ranges went by sendfile (the kernel), the small ones were copied.
    assert sum(kernel) == (1 << 20) + SENDFILE_MIN_BYTES + 700_000


def test_what_the_socket_does_not_take_at_once_waits_and_follows_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges far larger than the socket's buffers: each is sent straight away as far as the
    socket takes it, the rest once the peer has read, and the peer gets the frame's bytes in
    order."""
    kernel, looped = _count_sendfile(monkeypatch)
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(8 << 20))
    spans: list[bytes | tuple[int, int]] = [
        b"\0\0\0\x10head", (100, 3 << 20), b"mid", (4 << 20, 4 << 20), b"tail"]
    want = _frame_of(path, spans).materialise()
    data, raised = asyncio.run(_received(_frame_of(path, spans), send_buffer=64 * 1024))
    assert raised is None and data == want
    assert sum(kernel) == 7 << 20
    # Both ranges outgrew the buffers: a remainder of each waited in loop.sendfile.
    assert len(looped) == 2 and 0 < looped[0] < 3 << 20 and 0 < looped[1] < 4 << 20


def test_a_range_past_the_end_of_its_file_fails_the_frame(tmp_path: Path) -> None:
    """A file truncated under a queued frame: the writer stops with ShortFile (the server then
    closes the connection), never sending a frame shorter than its size says."""
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(1 << 20))
    frame = _frame_of(path, [b"head", (900_000, 200_000), b"tail"])
    data, raised = asyncio.run(_received(frame))
    assert isinstance(raised, ShortFile)
    assert len(data) < frame.size and not data.endswith(b"tail")
