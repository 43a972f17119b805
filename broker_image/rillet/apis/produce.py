"""Produce (key 0), v3-11 served; v0-2 advertised and answered UNSUPPORTED_VERSION.

v0-2 stay in the advertised range because librdkafka derives features from
it; they carry message formats v0/v1, which rillet does not store, so each
partition is answered UNSUPPORTED_VERSION, as Kafka 4.0 does (KIP-896); Kafka
3.x up-converted them to v2 on append, a second codec on the hot path for
pre-0.11 clients (README, "Protocol surface", says why not).
Batches are validated (magic 2, lengths, CRC-32C) and stored as sent, with
only base offset and leader epoch patched. acks=0 gets no response.
Transactional batches need the request's transactional_id and WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers); the log tracks each producer's
open transaction (storage/producer_state.py) until a WriteTxnMarkers marker ends it.
Clients may not write control batches (INVALID_RECORD). A producer's first transactional
batch on a partition is appended only once its transaction coordinator confirms the partition
was added to the transaction (KIP-890 part 1, txn/verification.py): else
TRANSACTION_ABORTABLE (v11) or INVALID_TXN_STATE (older), as Kafka 4.x answers.
v3: transactional id, RecordBatch v2. v5: log start offset. v7: zstd.
The request's size counts against the client's producer_byte_rate (quotas/manager.py).
v8: record errors, error message. v9: flexible. v10-11: current leader
(KIP-951, filled on NOT_LEADER_OR_FOLLOWER).
"""
from __future__ import annotations

import asyncio
import struct
from typing import Any

from ..internal_topics import OFFSETS_TOPIC
from ..protocol import errors
from ..protocol.codec import FramingError, response_schema
from ..protocol.produce_response import build_body
from ..quotas.entity import PRODUCER_BYTE_RATE
from ..records import BatchHeader, parse_batches
from ..txn.verdicts import check_still_verified, verification_error
from .registry import RequestContext, api


def _partition_error(index: int, exc: BaseException) -> dict[str, Any]:
    return {"index": index, "error_code": errors.code_of(exc, "produce"), "base_offset": -1,
            "log_append_time": -1, "log_start_offset": -1,
            "error_message": errors.message_of(exc)}


def _check_transactional(headers: list[BatchHeader], transactional_ok: bool) -> None:
    for header in headers:
        if header.is_control:
            raise errors.InvalidRecord("clients may not write control batches")
        if header.is_transactional:
            if not transactional_ok:
                raise errors.TransactionalIdAuthorizationFailed(
                    "transactional batches need a transactional id the producer may WRITE")
            if header.producer_id < 0:
                raise errors.InvalidRecord("a transactional batch needs a producer id")


Prepared = tuple[bytearray, list[BatchHeader]]
TopicPartition = tuple[str, int]
# Where a partition's data sits in the request (topic index, partition index): a request
# naming a partition twice appends each once, as before verification came.
Slot = tuple[int, int]
# A partition whose first transactional batch was verified: the producer and the guard.
Verified = tuple[int, int, object]
ABORTABLE_SINCE = 11   # the Produce versions that know TRANSACTION_ABORTABLE (KIP-890)


def _prepare(ctx: RequestContext, topic: str, index: int, records: bytes | None,
             transactional_ok: bool) -> Prepared:
    """The batches of one partition, parsed and checked before anything is appended."""
    if topic == OFFSETS_TOPIC:
        # Only the group coordinator writes there; a client append could corrupt groups.
        raise errors.InvalidTopicException(f"cannot append to internal topic {topic}")
    if records is None or len(records) == 0:
        ctx.broker.replication.leader_log(topic, index)  # not the leader: that error comes first
        raise errors.CorruptMessage(f"produce to {topic}-{index} carries no records")
    data = bytearray(records)
    headers = parse_batches(data)
    _check_transactional(headers, transactional_ok)
    return data, headers


def _first_transactional(headers: list[BatchHeader]) -> BatchHeader | None:
    return next((h for h in headers if h.is_transactional), None)


async def _verify(ctx: RequestContext, tid: str,
                  prepared: dict[Slot, tuple[TopicPartition, Prepared | BaseException]]
                  ) -> dict[Slot, Verified]:
    """KIP-890: ask the coordinator about every partition a producer's transactional batch
    would start a transaction on (one question per producer); a refusal replaces that
    partition's batches in ``prepared`` by its error."""
    verifier = ctx.broker.txn_coordinator.verifier
    asks: dict[tuple[int, int], set[TopicPartition]] = {}
    verified: dict[Slot, Verified] = {}
    for slot, (tp, item) in prepared.items():
        first = None if isinstance(item, BaseException) else _first_transactional(item[1])
        if first is None:
            continue
        try:
            state = ctx.broker.replication.leader_log(*tp).producer_state
        except errors.KafkaError:
            continue   # the append answers it
        if state.needs_verification(first.producer_id, first.producer_epoch):
            guard = state.verification_guard(first.producer_id)
            verified[slot] = (first.producer_id, first.producer_epoch, guard)
            asks.setdefault((first.producer_id, first.producer_epoch), set()).add(tp)
    results = await asyncio.gather(*(verifier.verify(tid, pid, epoch, sorted(tps))
                                     for (pid, epoch), tps in asks.items()))
    abortable_known = ctx.version >= ABORTABLE_SINCE
    refused = {tp: refusal for codes in results for tp, code in codes.items()
               if (refusal := verification_error(code, abortable_known)) is not None}
    for slot in [slot for slot in verified if prepared[slot][0] in refused]:
        tp = prepared[slot][0]
        prepared[slot] = (tp, refused[tp])
        del verified[slot]
    return verified


def _refuse_unverified(ctx: RequestContext, tp: TopicPartition, item: Prepared) -> None:
    """A partition whose leadership arrived here while the others were verified was never
    asked about: its first transactional batch must not go in unverified (the client
    retries, and is asked about then)."""
    first = _first_transactional(item[1])
    if first is not None and ctx.broker.replication.leader_log(*tp).producer_state \
            .needs_verification(first.producer_id, first.producer_epoch):
        raise errors.NotEnoughReplicas(
            f"{tp[0]}-{tp[1]} became led here while the transaction was verified")


def _append(ctx: RequestContext, topic: str, index: int, prepared: Prepared,
            acks: int) -> tuple[dict[str, Any], Any]:
    """Append one partition's batches; returns (response entry, log to flush)."""
    data, headers = prepared
    info, plog = ctx.broker.replication.append_as_leader(topic, index, data, headers, acks)
    ctx.broker.metrics.bytes_in += len(data)
    return ({"index": index, "error_code": 0, "base_offset": info.base_offset,
             "log_append_time": info.log_append_time,
             "log_start_offset": info.log_start_offset}, plog)


def _prepare_all(ctx: RequestContext, req: Any, transactional_ok: bool
                 ) -> dict[Slot, tuple[TopicPartition, Prepared | BaseException]]:
    """Every partition's batches, or the error it is answered with."""
    prepared: dict[Slot, tuple[TopicPartition, Prepared | BaseException]] = {}
    for ti, topic in enumerate(req.topic_data):
        may_write = ctx.authorized("WRITE", "TOPIC", topic.name)
        for pi, pdata in enumerate(topic.partition_data):
            tp = (topic.name, pdata.index)
            try:
                if not may_write:
                    raise errors.TopicAuthorizationFailed(
                        f"{ctx.principal} may not WRITE topic {topic.name}")
                if req.acks not in (-1, 0, 1):
                    raise errors.InvalidRequiredAcks(
                        f"acks must be -1, 0 or 1, got {req.acks}")
                prepared[(ti, pi)] = (tp, _prepare(ctx, topic.name, pdata.index,
                                                   pdata.records, transactional_ok))
            except Exception as exc:  # one partition's failure never aborts the request
                prepared[(ti, pi)] = (tp, exc)
    return prepared


@api(key=0, versions=(0, 11), decodable_from=3,
     raw_handler=lambda ctx, frame: _legacy_produce(ctx, frame))
async def produce(ctx: RequestContext, req: Any) -> Any:
    acks = req.acks
    results: list[dict[str, Any]] = []
    to_flush = []
    replicated: list[tuple[str, int, dict[str, Any], int]] = []
    tid = req.transactional_id
    transactional_ok = tid is not None and ctx.authorized("WRITE", "TRANSACTIONAL_ID", tid)
    prepared = _prepare_all(ctx, req, transactional_ok)
    verified: dict[Slot, Verified] = {}
    verifying = transactional_ok and ctx.broker.txn_coordinator.verifier.enabled
    if verifying:
        verified = await _verify(ctx, tid, prepared)
    for ti, topic in enumerate(req.topic_data):
        parts = []
        for pi, pdata in enumerate(topic.partition_data):
            try:
                tp, item = prepared[(ti, pi)]
                if isinstance(item, BaseException):
                    raise item
                if (ti, pi) in verified:   # no await from here to the append
                    check_still_verified(ctx.broker.replication.leader_log(*tp).producer_state,
                                         *verified[(ti, pi)], f"{tp[0]}-{tp[1]}")
                elif verifying:
                    _refuse_unverified(ctx, tp, item)
                entry, plog = _append(ctx, topic.name, pdata.index, item, acks)
                to_flush.append(plog)
                if acks == -1 and plog.high_watermark < plog.log_end_offset:
                    # Followers must fetch it first. When the ISR is already satisfied (a
                    # single node: the leader is the whole ISR) the high watermark passed the
                    # batches inside the append, with min.insync.replicas checked just before
                    # and no await between: done, no waiter and no task.
                    replicated.append((topic.name, pdata.index, entry, plog.log_end_offset))
            except Exception as exc:  # one partition's failure never aborts the request
                entry = _partition_error(pdata.index, exc)
            parts.append(entry)
        results.append({"name": topic.name, "partition_responses": parts})
    # flush.messages: fsync (off the event loop, partitions in parallel) before acknowledging.
    pending = [plog for plog in to_flush if plog.flush_pending()]
    if len(pending) == 1:
        await pending[0].maybe_flush()
    elif pending:
        await asyncio.gather(*(plog.maybe_flush() for plog in pending))
    if replicated:
        timeout_s = max(req.timeout.total_seconds(), 0.0)
        waits = [_await_replication(ctx, t, p, entry, end, timeout_s)
                 for t, p, entry, end in replicated]
        await (waits[0] if len(waits) == 1 else asyncio.gather(*waits))
    ctx.record_quota(PRODUCER_BYTE_RATE, ctx.request_bytes)
    if acks == 0:
        return None
    return build_body(response_schema(0, ctx.version), results, 0)


async def _await_replication(ctx: RequestContext, topic: str, index: int,
                             entry: dict[str, Any], end_offset: int, timeout_s: float) -> None:
    """acks=all: answer once every in-sync replica has the batches (the high watermark passed
    them) and the ISR still meets min.insync.replicas; the error otherwise."""
    try:
        await ctx.broker.replication.wait_for_high_watermark((topic, index), end_offset,
                                                             timeout_s)
        ctx.broker.replication.check_min_insync(topic, index, after_append=True)
    except Exception as exc:
        entry.update(_partition_error(index, exc))


def _legacy_produce(ctx: RequestContext, frame: bytes) -> bytes | None:
    """Produce v0-2: parse just enough to answer every partition UNSUPPORTED_VERSION. kio has
    no schema for these versions, so every length is bounded here by the bytes left."""
    try:
        return _legacy_answer(ctx, frame)
    except (struct.error, ValueError) as exc:
        raise FramingError(f"malformed produce v{ctx.version} request: {exc}") from exc


def _legacy_answer(ctx: RequestContext, frame: bytes) -> bytes | None:
    version = ctx.version
    pos = 8
    (client_len,) = struct.unpack_from(">h", frame, pos)
    pos = _skip(frame, pos + 2, client_len)
    acks, _timeout, topic_count = struct.unpack_from(">hii", frame, pos)
    pos += 10
    _bound(frame, pos, topic_count, 6)  # a name length and a partition count at least
    out = bytearray()
    out += struct.pack(">i", ctx.header.correlation_id)
    out += struct.pack(">i", topic_count)
    for _ in range(topic_count):
        (name_len,) = struct.unpack_from(">h", frame, pos)
        if name_len < 0:
            raise ValueError(f"topic name of length {name_len}")
        name = frame[pos:pos + 2 + name_len]
        pos = _skip(frame, pos + 2, name_len)
        (pcount,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        _bound(frame, pos, pcount, 8)  # an index and a records length at least
        out += name + struct.pack(">i", pcount)
        for _ in range(pcount):
            index, size = struct.unpack_from(">ii", frame, pos)
            pos = _skip(frame, pos + 8, size)
            out += struct.pack(">ihq", index, errors.UnsupportedVersion.code, -1)
            if version >= 2:
                out += struct.pack(">q", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    if acks == 0:
        return None
    return struct.pack(">i", len(out)) + bytes(out)


def _skip(frame: bytes, pos: int, length: int) -> int:
    """The position after a field of ``length`` bytes (-1: null) at ``pos``."""
    if length < -1 or pos + max(length, 0) > len(frame):
        raise ValueError(f"field of {length} bytes at {pos} in {len(frame)}")
    return pos + max(length, 0)


def _bound(frame: bytes, pos: int, count: int, min_size: int) -> None:
    if count < 0 or count * min_size > len(frame) - pos:
        raise ValueError(f"{count} entries in {len(frame) - pos} bytes")
