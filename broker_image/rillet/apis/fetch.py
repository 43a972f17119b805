"""Fetch (key 1), v4-12, for consumers (replica_id -1).

Long poll: waits up to max_wait for min_bytes, woken by appends. At least
one whole batch is returned even above max_bytes / partition_max_bytes
(KIP-74), but only for the first partition with data. Reads stop at the
high watermark; with isolation_level 1 (READ_COMMITTED) at the last stable offset (LSO),
with the aborted transactions overlapping the returned range so the consumer drops their
batches (control batches go out as stored: clients skip them). Every consumer response
carries the LSO. Consumers' fetch sessions are declined (session_id 0 in every
response), which clients handle by sending full fetch requests; followers' are served
(KIP-227, replication/fetch_sessions.py): after a full fetch opening the session a
follower names only the partitions whose position changed, and is answered only the
partitions with something new, so an idle round does not walk thousands of partitions
through the codec twice; which unnamed ones have something new is kept as they move
(replication/session_news.py), so such a fetch does not look at the others either.
On the controller listener, a Fetch of __cluster_metadata-0 is a follower of
the metadata quorum pulling the Raft log (see apis/quorum_rpc.py).
A Fetch with a replica id is a follower of a partition replicating it (see
_read_for_follower); a throttled replica gets no records while the leader's replication
quota is exceeded (replication/throttle.py); followers read to the log end whatever the
isolation level.
Not v0-3 (Kafka 3.x served them by down-converting to message formats v0/v1, which rillet
does not store): older librdkafka (2.0.2 checked) then disables its MsgVer1 and ThrottleTime
features, which it uses only without MsgVer2 (Produce 3 + Fetch 4, served), so nothing
changes for it; checked with librdkafka 2.0.2 (issue 32).
v4: isolation level, last stable offset. v5: log start offset. v7: sessions.
v9: current leader epoch. v11: rack id; followers serve consumers and leaders may
name a preferred read replica (replication/read_replica.py). v12: flexible, diverging epoch.
A consumer's fetch counts its records' bytes against consumer_byte_rate (quotas/manager.py),
as Kafka: one that would take the client over its quota is answered empty, with the wait,
and not counted; a fetch never reads more than the quota's window allows, so it can pass.
Replicas' fetches are exempt from client quotas.
Zero copy (issue 25): records are not read here; each partition's records are the byte
ranges of its segment files (protocol/file_records.py) on descriptors of their own, the
response is framed around them, and a plaintext connection sends them with sendfile
(frame_writer.py); TLS copies them. Consumers and followers alike.
"""
from __future__ import annotations

import errno
import time
from typing import Any, Callable, Hashable

from ..metadata.log import METADATA_TOPIC
from ..peer_watch import peer_may_end
from ..protocol import errors
from ..protocol.file_records import FileRecords
from ..quotas.entity import CONSUMER_BYTE_RATE
from ..records import parse_batches
from ..raft import rpc
from ..raft.divergence import BelowStart, divergence
from ..replication import read_replica
from ..replication.fetch_sessions import PartitionFetch
from ..storage.segment import scan_batches
from . import quorum_rpc
from .registry import CLUSTER, RequestContext, api


READ_COMMITTED = 1
TopicPartition = tuple[str, int]


def _end_of(records: FileRecords | bytes, start: int) -> int:
    """The offset after the last whole batch of ``records`` (``start`` when none), from the
    batches' headers (in the files, or in the bytes of a copied read)."""
    if not isinstance(records, FileRecords):
        headers = parse_batches(records, verify_crc=False, strict=False) if records else []
        return headers[-1].next_offset if headers else start
    end = start
    for r in records.ranges:
        for header, _ in scan_batches(r.file.fileno(), r.position, r.position + r.length):
            end = header.next_offset
    return end


def _read(plog: Any, offset: int, max_bytes: int, *, max_offset: int | None = None,
          min_one_batch: bool) -> FileRecords | bytes:
    """The log's batches from ``offset`` left in its segment files (b"" when none): the
    response is framed around them and they go out with sendfile (protocol/file_records.py)."""
    slices = plog.read_slices(offset, max_bytes, max_offset=max_offset,
                              min_one_batch=min_one_batch)
    if not slices:
        return b""
    try:
        return FileRecords.pin(slices)
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        # Out of descriptors (a fetch of thousands of partitions near the limit): these
        # records are copied rather than the partition failed.
        return plog.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)


def _release(topics: list[dict[str, Any]]) -> None:
    """Close the files a read that is not answered holds (a long poll reading again, an
    answer held back by a quota)."""
    for topic in topics:
        for entry in topic["partitions"]:
            if isinstance(entry["records"], FileRecords):
                entry["records"].close()


def _read_partition(ctx: RequestContext, topic: str, p: Any, budget: int,
                    min_one: bool, rack_id: str, isolation: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": p.partition, "error_code": 0,
                             "high_watermark": -1, "last_stable_offset": -1,
                             "log_start_offset": -1, "records": b"",
                             "aborted_transactions": None}
    try:
        source = read_replica.consumer_read_source(
            ctx.broker.replication, ctx.broker.config["replica.selector.class"], topic,
            p.partition, getattr(p, "current_leader_epoch", -1),
            ctx.version, rack_id, p.fetch_offset)
        plog = source.plog
        entry["high_watermark"] = plog.high_watermark
        stable = entry["last_stable_offset"] = plog.last_stable_offset
        entry["log_start_offset"] = plog.log_start_offset
        if p.fetch_offset > plog.log_end_offset or p.fetch_offset < plog.log_start_offset:
            raise errors.OffsetOutOfRange(
                f"fetch offset {p.fetch_offset} of {topic}-{p.partition} is outside "
                f"[{plog.log_start_offset}, {plog.log_end_offset}]")
        if source.preferred != read_replica.NO_REPLICA:
            # KIP-392: no records, the consumer fetches from this replica next.
            entry["preferred_read_replica"] = source.preferred
            ctx.broker.replication.consumer_fetches.redirected += 1
            return entry
        limit = min(p.partition_max_bytes, budget)
        committed = isolation == READ_COMMITTED
        if limit > 0 or min_one:
            entry["records"] = _read(plog, p.fetch_offset, max(limit, 0),
                                     max_offset=stable if committed else plog.high_watermark,
                                     min_one_batch=min_one)
        if committed:
            # Up to the LSO first (usually none at all); only then is it worth walking the
            # returned batches to name just those overlapping them, as Kafka does.
            aborted = plog.aborted_transactions(p.fetch_offset, stable)
            if aborted:
                upper = _end_of(entry["records"], p.fetch_offset)
                aborted = [a for a in aborted if a.first_offset < upper]
            entry["aborted_transactions"] = [
                {"producer_id": a.producer_id, "first_offset": a.first_offset}
                for a in aborted]
        ctx.broker.replication.consumer_fetches.count(
            (topic, p.partition), source.role, len(entry["records"]), rack_id)
    except Exception as exc:
        entry["error_code"] = errors.code_of(exc, "fetch")
        if isinstance(entry.get("records"), FileRecords):
            entry["records"].close()   # an error answers no records: release the files
            entry["records"] = b""
    return entry


def _read_for_follower(ctx: RequestContext, tp: TopicPartition, p: PartitionFetch,
                       replica_id: int, budget: int, min_one: bool) -> dict[str, Any]:
    """A follower's fetch: records up to the log end (not the high watermark), its progress
    recorded for the high watermark and the ISR, or the epoch where its log diverges."""
    topic, partition = tp
    entry: dict[str, Any] = {"partition_index": partition, "error_code": 0,
                             "high_watermark": -1, "last_stable_offset": -1,
                             "log_start_offset": -1, "records": b"",
                             "aborted_transactions": None}
    try:
        part, plog = ctx.broker.replication.leader_partition(topic, partition,
                                                             p.current_leader_epoch)
        if replica_id not in part.replicas:
            raise errors.NotLeaderOrFollower(
                f"broker {replica_id} is not a replica of {topic}-{partition}")
        entry["log_start_offset"] = plog.log_start_offset
        diverging = _divergence(plog, p)
        if diverging is not None:
            entry["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
            entry["high_watermark"] = entry["last_stable_offset"] = plog.high_watermark
            return entry
        if p.fetch_offset > plog.log_end_offset or p.fetch_offset < plog.log_start_offset:
            raise errors.OffsetOutOfRange(
                f"replica fetch offset {p.fetch_offset} of {topic}-{partition} is outside "
                f"[{plog.log_start_offset}, {plog.log_end_offset}]")
        ctx.broker.replication.on_follower_fetch(tp, replica_id, p.fetch_offset)
        entry["high_watermark"] = entry["last_stable_offset"] = plog.high_watermark
        throttle = ctx.broker.replication.throttles.leader
        if throttle.holds_back(tp, replica_id in part.isr):
            return entry
        limit = min(p.partition_max_bytes, budget)
        if limit > 0 or min_one:
            entry["records"] = _read(plog, p.fetch_offset, max(limit, 0), min_one_batch=min_one)
            throttle.record(tp, len(entry["records"]))
    except Exception as exc:
        entry["error_code"] = errors.code_of(exc, "replica fetch")
    return entry


def _divergence(plog: Any, p: PartitionFetch) -> tuple[int, int] | None:
    """(epoch, end offset) the follower must truncate to, or None if its log matches ours."""
    found = divergence(p.fetch_offset, p.last_fetched_epoch,
                       plog.end_offset_for_epoch(p.last_fetched_epoch))
    if isinstance(found, BelowStart):
        # Its log parts from ours before our first batch: it starts again at our log start.
        return -1, plog.log_start_offset
    return found


def _partition_fetch(p: Any) -> PartitionFetch:
    # Fetch v4-8 carry no current leader epoch, v4-11 no last fetched epoch.
    return PartitionFetch(p.fetch_offset, getattr(p, "current_leader_epoch", -1),
                          getattr(p, "last_fetched_epoch", -1),
                          getattr(p, "log_start_offset", -1), p.partition_max_bytes)


def _read_for_follower_all(ctx: RequestContext, wanted: dict[TopicPartition, PartitionFetch],
                           replica_id: int, budget: int
                           ) -> tuple[list[dict[str, Any]], int, bool]:
    total = 0
    errored = False
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, p in wanted.items():
        entry = _read_for_follower(ctx, tp, p, replica_id, budget - total, min_one=total == 0)
        total += len(entry["records"])
        # A follower told to truncate must hear it now, not after a long poll.
        errored = errored or entry["error_code"] != 0 or "diverging_epoch" in entry
        topics.setdefault(tp[0], []).append(entry)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()], total, errored


def _read_all(ctx: RequestContext, req: Any, denied: set[str], budget: int
              ) -> tuple[list[dict[str, Any]], int, bool]:
    total = 0
    errored = False
    topics = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            if topic.topic in denied:
                entry = {"partition_index": p.partition, "high_watermark": -1,
                         "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
                         "aborted_transactions": None,
                         "error_code": errors.TopicAuthorizationFailed.code}
            else:
                entry = _read_partition(ctx, topic.topic, p, budget - total, min_one=total == 0,
                                        rack_id=getattr(req, "rack_id", "") or "",
                                        isolation=getattr(req, "isolation_level", 0))
            size = len(entry["records"])
            total += size
            # A consumer sent to another replica must hear it now, not after a long poll.
            errored = errored or entry["error_code"] != 0 or "preferred_read_replica" in entry
            parts.append(entry)
        topics.append({"topic": topic.topic, "partitions": parts})
    return topics, total, errored


async def _long_poll(ctx: RequestContext, req: Any, tps: list[Hashable],
                     read: Callable[[], tuple[list[dict[str, Any]], int, bool]]
                     ) -> tuple[list[dict[str, Any]], int]:
    """(topics, record bytes) of `read` once it has min_bytes, an error the fetcher must
    hear now, or max_wait passed; woken by appends and high watermarks on `tps` (or news
    of a fetch session among them)."""
    deadline = time.monotonic() + req.max_wait.total_seconds()
    while True:
        topics, total, errored = read()
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or errored or remaining <= 0 or not tps:
            return topics, total
        _release(topics)   # read again once woken
        with peer_may_end():   # a client gone meanwhile frees its connection now
            await ctx.broker.replication.wait_for_append(tps, remaining)


async def _follower_fetch(ctx: RequestContext, req: Any) -> Any:
    """A follower's Fetch, through its fetch session if it has one."""
    if not ctx.authorized("CLUSTER_ACTION", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0, "session_id": 0, "responses": [],
                             "error_code": errors.ClusterAuthorizationFailed.code})
    ctx.quota_exempt = True
    named = {(t.topic, p.partition): _partition_fetch(p) for t in req.topics
             for p in t.partitions}
    forgotten = [(t.topic, p) for t in getattr(req, "forgotten_topics_data", None) or ()
                 for p in t.partitions]
    try:   # Fetch v4-6 carry no session: sessionless
        session, full = ctx.broker.replication.fetch_sessions.resolve(
            req.replica_id, getattr(req, "session_id", 0), getattr(req, "session_epoch", -1),
            named, forgotten)
    except (errors.FetchSessionIdNotFound, errors.InvalidFetchSessionEpoch) as exc:
        return ctx.response({"throttle_time": 0, "error_code": exc.code, "session_id": 0,
                             "responses": []})

    news = ctx.broker.replication.session_news

    def read() -> tuple[list[dict[str, Any]], int, bool]:
        wanted = named
        if session is not None and full:
            news.opened(session)
        elif session is not None:
            wanted = {**named, **news.unnamed(session, named)}
        return _read_for_follower_all(ctx, wanted, req.replica_id, req.max_bytes)

    # A session's fetch waits on the session: woken by news of any of its partitions.
    topics, total = await _long_poll(
        ctx, req, [session] if session is not None else list(named), read)
    if session is not None:
        for topic in topics:
            for entry in topic["partitions"]:
                news.answered(session, (topic["topic"], entry["partition_index"]),
                              entry["high_watermark"], entry["log_start_offset"])
    ctx.broker.metrics.fetch_sent(total, follower=True)
    ctx.spliced = True   # from here the response owns the files (file_records.py)
    return ctx.response({"throttle_time": 0, "error_code": 0,
                         "session_id": session.id if session is not None else 0,
                         "responses": topics})


@api(key=1, versions=(4, 12))
async def fetch(ctx: RequestContext, req: Any) -> Any:
    if ctx.listener == "controller" and rpc.is_quorum_fetch(req, METADATA_TOPIC):
        return await quorum_rpc.answer(ctx, rpc.FETCH, req)
    if req.replica_id >= 0:
        return await _follower_fetch(ctx, req)
    denied = {t.topic for t in req.topics if not ctx.authorized("READ", "TOPIC", t.topic)}
    budget = min(req.max_bytes, ctx.quota_allowance(CONSUMER_BYTE_RATE))
    tps = [(t.topic, p.partition) for t in req.topics for p in t.partitions
           if t.topic not in denied]
    topics, total = await _long_poll(ctx, req, tps,
                                     lambda: _read_all(ctx, req, denied, budget))
    if ctx.record_quota(CONSUMER_BYTE_RATE, total) > 0:
        ctx.unrecord_quota(CONSUMER_BYTE_RATE, total)
        _release(topics)
        return ctx.response({"throttle_time": 0, "error_code": 0, "session_id": 0,
                             "responses": []})
    ctx.broker.metrics.fetch_sent(total, follower=False)
    # From here the response owns the files: dispatch frames it (file_records.py).
    ctx.spliced = True
    return ctx.response({"throttle_time": 0, "error_code": 0, "session_id": 0,
                         "responses": topics})
