"""PartitionLog against a plain list model under random operation sequences (hypothesis).

Operations: appends of random sizes (rolling small segments), an idempotent
producer and its retries, leader epoch changes, clean restarts,
crashes (reopen without close), crashes that tear the active segment at a random
byte, truncation, retention by size. After each step every invariant a client
relies on is checked: dense offsets from the log start, each record's key and
timestamp, reads bounded by max_bytes, and timestamp lookups. Bounded: 40
sequences of at most 30 steps.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet.protocol.errors import OutOfOrderSequenceNumber
from rillet.records import Record, decode_records, encode_batch, parse_batches
from rillet.storage.log import PartitionLog
from rillet.storage.log_config import LogConfig

from .helpers import FakeClock

NO_EXPIRY = 2**62  # the model producer writes 1970 timestamps: keep it known
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=150, producer_id_expiration_ms=NO_EXPIRY)

ops = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(1, 250), st.integers(-500, 2000)),
    st.tuples(st.just("produce"), st.integers(1, 4), st.integers(1, 250)),
    st.tuples(st.just("retry")),
    st.tuples(st.just("new_leader_epoch")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash")),
    st.tuples(st.just("crash_torn"), st.integers(1, 10_000)),
    st.tuples(st.just("truncate"), st.integers(0, 60)),
    st.tuples(st.just("retention"), st.integers(0, 4000)),
)


@dataclass
class Model:
    """What the log must contain: (offset, key, timestamp) per record, plus the log start."""

    records: list[tuple[int, bytes, int]] = field(default_factory=list)
    batches: list[tuple[int, int]] = field(default_factory=list)  # (base, last) offsets
    start: int = 0
    end: int = 0
    # the idempotent producer: (base offset, first seq, record count) of its batches in the log
    produced: list[tuple[int, int, int]] = field(default_factory=list)
    next_seq: int = 0  # the client's own counter
    last_sent: bytes = b""  # the client's latest batch, for retries
    last_sent_seq: int = -1
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (leader epoch, start offset)
    leader_epoch: int = 0

    def drop_from(self, offset: int) -> None:
        self.records = [r for r in self.records if r[0] < offset]
        self.batches = [b for b in self.batches if b[1] < offset]
        self.produced = [p for p in self.produced if p[0] < offset]
        self.epochs = [e for e in self.epochs if e[1] < offset]
        self.end = offset

    def drop_before(self, offset: int) -> None:
        """Retention moved the log start: epochs before it collapse into one starting there."""
        self.produced = [p for p in self.produced if p[0] >= offset]
        before = [e for e in self.epochs if e[1] < offset]
        if before:
            self.epochs = [(before[-1][0], offset)] + [e for e in self.epochs if e[1] >= offset]

    def reopened(self) -> None:
        """On open the epoch cache keeps only epochs that start below the log end (as Kafka)."""
        self.epochs = [e for e in self.epochs if e[1] < self.end]

    def add(self, records: list[Record], epoch: int) -> int:
        base = self.end
        self.records += [(base + i, r.key or b"", r.timestamp) for i, r in enumerate(records)]
        self.batches.append((base, base + len(records) - 1))
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs.append((epoch, base))
        self.end += len(records)
        return base


def crash(plog: PartitionLog) -> None:
    """Abandon the object the way kill -9 does: nothing written on the way out."""
    plog.local.closed = True
    for segment in plog.segments:
        segment.close()


def check(plog: PartitionLog, model: Model) -> None:
    assert plog.log_start_offset == model.start
    assert plog.log_end_offset == model.end
    got: list[tuple[int, bytes, int]] = []
    offset = model.start
    while offset < plog.log_end_offset:
        data = plog.read(offset, 700)
        headers = parse_batches(data)
        assert len(data) <= 700 or len(headers) == 1
        for header in headers:
            _, records = decode_records(data[header.position:header.position + header.size])
            got += [(r.offset, r.key or b"", r.timestamp) for r in records]
        offset = headers[-1].next_offset
    assert got == [r for r in model.records if r[0] >= model.start]
    for target in (-1000, 0, 700, 1500, 3000):
        hits = [(o, t) for o, _, t in got if t >= target]
        assert plog.offset_for_timestamp(target) == (min(hits) if hits else None)
    assert plog.latest_epoch == (model.epochs[-1][0] if model.epochs else -1)
    if model.epochs:
        assert plog.end_offset_for_epoch(model.epochs[-1][0]) == (model.epochs[-1][0], model.end)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(ops, min_size=1, max_size=30))
def test_log_matches_model(tmp_path: Path, steps: list[tuple]) -> None:
    directory = Path(tempfile.mkdtemp(dir=tmp_path)) / "t-0"
    clock = FakeClock()
    plog = PartitionLog.open(directory, CONFIG, clock=clock)
    model = Model()
    serial = 0
    for step in steps:
        kind = step[0]
        if kind == "append":
            _, count, size, ts = step
            records = [Record(i, ts + i * 37, b"r%d" % (serial + i), b"x" * size) for i in range(count)]
            serial += count
            data = bytearray(encode_batch(records))
            info = plog.append(data, parse_batches(data), leader_epoch=model.leader_epoch)
            plog.high_watermark = plog.log_end_offset
            assert info.base_offset == model.add(records, model.leader_epoch)
        elif kind == "produce":
            _, count, size = step
            # a client continues from what the log still holds of it (else from its own counter)
            seq = model.produced[-1][1] + model.produced[-1][2] if model.produced else model.next_seq
            records = [Record(i, 1000 + i, b"p%d" % (serial + i), b"y" * size) for i in range(count)]
            serial += count
            model.last_sent = encode_batch(records, producer_id=7, producer_epoch=0, base_sequence=seq)
            model.last_sent_seq = seq
            data = bytearray(model.last_sent)
            info = plog.append(data, parse_batches(data), leader_epoch=model.leader_epoch)
            plog.high_watermark = plog.log_end_offset
            base = model.add(records, model.leader_epoch)
            assert info.base_offset == base and not info.duplicate
            model.produced.append((base, seq, count))
            model.next_seq = seq + count
        elif kind == "retry":
            if not model.last_sent:
                continue
            data = bytearray(model.last_sent)
            headers = parse_batches(data)
            survivor = [p for p in model.produced if p[1] == model.last_sent_seq]
            expected_seq = model.produced[-1][1] + model.produced[-1][2] if model.produced else None
            if survivor:
                info = plog.append(data, headers, leader_epoch=model.leader_epoch)
                assert info.duplicate and info.base_offset == survivor[0][0]
            elif expected_seq is None or expected_seq == model.last_sent_seq:
                info = plog.append(data, headers, leader_epoch=model.leader_epoch)
                plog.high_watermark = plog.log_end_offset
                _, records = decode_records(model.last_sent)
                base = model.add(records, model.leader_epoch)
                assert info.base_offset == base and not info.duplicate
                model.produced.append((base, model.last_sent_seq, len(records)))
            else:
                with pytest.raises(OutOfOrderSequenceNumber):
                    plog.append(data, headers, leader_epoch=model.leader_epoch)
        elif kind == "new_leader_epoch":
            model.leader_epoch += 1
        elif kind == "restart":
            plog.close()
            plog = PartitionLog.open(directory, CONFIG, clock=clock)
            model.reopened()
        elif kind == "crash":
            crash(plog)
            plog = PartitionLog.open(directory, CONFIG, clock=clock)
            model.reopened()
        elif kind == "crash_torn":
            active = plog.segments[-1]
            crash(plog)
            size = active.log_path.stat().st_size
            if size:
                cut = step[1] % size
                headers = parse_batches(active.log_path.read_bytes(), strict=False)
                with open(active.log_path, "r+b") as f:
                    f.truncate(cut)
                # the model keeps the batches that end at or before the cut
                kept = [h for h in headers if h.position + h.size <= cut]
                kept_end = kept[-1].next_offset if kept else active.base_offset
                model.drop_from(kept_end)
            plog = PartitionLog.open(directory, CONFIG, clock=clock)
            model.reopened()
        elif kind == "truncate":
            target = model.start + step[1]
            if target < model.end:
                # the batch holding the target goes whole
                cut = min((b[0] for b in model.batches if b[1] >= target), default=model.end)
                plog.truncate_to(target)
                model.drop_from(max(cut, model.start))
                if cut <= model.start:
                    model.start = model.end = plog.log_start_offset
        elif kind == "retention":
            plog.update_config(LogConfig(segment_bytes=1200, index_interval_bytes=150, retention_bytes=step[1],
                                        producer_id_expiration_ms=NO_EXPIRY))
            plog.apply_retention()
            model.start = plog.log_start_offset
            model.drop_before(model.start)
            if model.end < model.start:
                model.end = model.start
        check(plog, model)
    plog.close()
