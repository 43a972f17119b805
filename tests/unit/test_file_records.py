"""Zero-copy Fetch framing (protocol/file_records.py): a response whose records stay in their
segment files encodes to exactly the bytes of the same response with the records copied,
for every Fetch version served, and keeps its files readable whatever the log does next."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from rillet.protocol.build import build
from rillet.protocol.codec import (decode_response, encode_response, encode_spliced_response,
                                   response_schema)
from rillet.protocol.file_records import FileRange, FileRecords, ShortFile, SplicedFrame
from rillet.storage.log import PartitionLog
from rillet.storage.segment import segment_name

from .storage.helpers import append, make_batch, open_log

FETCH = 1
VERSIONS = range(4, 13)


def _log(tmp_path: Path, name: str, batches: int) -> PartitionLog:
    """A log over several segments, batches of varying sizes."""
    plog = open_log(tmp_path / name, segment_bytes=4000, index_interval_bytes=300)
    for i in range(batches):
        append(plog, make_batch(1 + i % 4, value_size=120 + 35 * i, tag=f"{name}{i}"))
    return plog


def _partitions(plogs: list[PartitionLog], copied: bool) -> list[dict[str, Any]]:
    """The partitions of one response, from each log at several offsets and limits: records
    copied (the old path) or left in their files."""
    def records(plog: PartitionLog, offset: int, limit: int, max_offset: int | None) -> Any:
        if copied:
            return plog.read(offset, limit, max_offset=max_offset)
        slices = plog.read_slices(offset, limit, max_offset=max_offset)
        return FileRecords.pin(slices) if slices else b""

    out = []
    for index, plog in enumerate(plogs):
        for n, (offset, limit, max_offset) in enumerate(
                [(0, 1 << 20, None), (3, 900, None), (5, 1, None), (2, 5000, 7),
                 (plog.log_end_offset, 1 << 20, None)]):
            out.append({"partition_index": index * 10 + n, "error_code": 0,
                        "high_watermark": plog.high_watermark,
                        "last_stable_offset": plog.last_stable_offset,
                        "log_start_offset": plog.log_start_offset,
                        "aborted_transactions": None,
                        "records": records(plog, offset, limit, max_offset)})
    return out


def _response(version: int, plogs: list[PartitionLog], copied: bool) -> Any:
    """Records beside every other shape a Fetch answer takes: errors, aborted transactions,
    a preferred read replica (v11), a diverging epoch (v12), a throttle."""
    parts = _partitions(plogs, copied)
    parts[1]["aborted_transactions"] = [{"producer_id": 7, "first_offset": 3},
                                        {"producer_id": 9, "first_offset": 4}]
    parts[2]["aborted_transactions"] = []
    parts[3]["error_code"] = 0
    extra = [{"partition_index": 90, "error_code": 1, "high_watermark": -1,
              "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
              "aborted_transactions": None},
             {"partition_index": 91, "error_code": 0, "high_watermark": 12,
              "last_stable_offset": 12, "log_start_offset": 0, "records": b"",
              "aborted_transactions": None, "preferred_read_replica": 2},
             {"partition_index": 92, "error_code": 0, "high_watermark": 12,
              "last_stable_offset": 12, "log_start_offset": 0, "records": b"",
              "aborted_transactions": None,
              "diverging_epoch": {"epoch": 3, "end_offset": 8}}]
    return build(response_schema(FETCH, version),
                 {"throttle_time": 25, "error_code": 0, "session_id": 0,
                  "responses": [{"topic": "first", "partitions": parts[:6]},
                                {"topic": "second-topic", "partitions": parts[6:] + extra}]})


@pytest.mark.parametrize("version", VERSIONS)
def test_spliced_frame_is_byte_for_byte_the_copied_frame(tmp_path: Path, version: int) -> None:
    plogs = [_log(tmp_path, "a-0", 14), _log(tmp_path, "b-1", 9)]
    assert all(p.segment_count > 1 for p in plogs)
    copied = encode_response(FETCH, 4242, _response(version, plogs, copied=True))
    frame = encode_spliced_response(FETCH, 4242, _response(version, plogs, copied=False))
    assert frame.size == len(copied)
    assert sum(isinstance(p, FileRange) for p in frame.parts) >= 6
    assert frame.materialise() == copied
    # and it is a Fetch response a client reads back, records and all
    _, body = decode_response(FETCH, version, copied[4:])
    assert body.responses[0].partitions[0].records == plogs[0].read(0, 1 << 20)


def test_a_frame_without_file_records_is_one_part(tmp_path: Path) -> None:
    body = build(response_schema(FETCH, 12), {"throttle_time": 0, "error_code": 0,
                                              "session_id": 0, "responses": []})
    frame = encode_spliced_response(FETCH, 1, body)
    assert frame.parts == [encode_response(FETCH, 1, body)]


def test_segments_deleted_and_rolled_after_the_read_still_send_what_was_read(
        tmp_path: Path) -> None:
    plog = _log(tmp_path, "t-0", 14)
    want = plog.read(0, 1 << 20)
    records = FileRecords.pin(plog.read_slices(0, 1 << 20))
    plog.roll()
    append(plog, make_batch(3))
    plog.delete_segments_before(plog.log_end_offset)   # retention: the read segment goes
    assert not (tmp_path / "t-0" / segment_name(0, ".log")).exists()
    plog.close()
    assert records.read() == want
    records.close()


def test_a_file_truncated_under_a_frame_is_a_short_file(tmp_path: Path) -> None:
    plog = _log(tmp_path, "t-0", 6)
    body = build(response_schema(FETCH, 12), {
        "throttle_time": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": 6,
            "last_stable_offset": 6, "log_start_offset": 0, "aborted_transactions": None,
            "records": FileRecords.pin(plog.read_slices(0, 1 << 20))}]}]})
    frame = encode_spliced_response(FETCH, 1, body)
    plog.truncate_to(2)   # a follower cutting its log under a queued answer
    with pytest.raises(ShortFile):
        frame.materialise()
    assert _all_closed(frame)


def test_file_records_never_pass_for_bytes(tmp_path: Path) -> None:
    """Written anywhere but into a spliced frame, a FileRecords fails rather than framing a
    length with no bytes behind it."""
    plog = _log(tmp_path, "t-0", 3)
    records = FileRecords.pin(plog.read_slices(0, 1 << 20))
    assert len(records) == len(plog.read(0, 1 << 20))
    with pytest.raises(TypeError):
        io.BytesIO().write(records)  # type: ignore[arg-type]
    records.close()


def test_a_frame_closes_its_descriptors_once_materialised(tmp_path: Path) -> None:
    plog = _log(tmp_path, "t-0", 14)
    before = len(os.listdir("/proc/self/fd"))
    frame = encode_spliced_response(FETCH, 1, _response(12, [plog], copied=False))
    assert len(os.listdir("/proc/self/fd")) > before
    frame.materialise()
    assert _all_closed(frame) and len(os.listdir("/proc/self/fd")) == before


def _all_closed(frame: SplicedFrame) -> bool:
    return all(p.file.closed for p in frame.parts if isinstance(p, FileRange))
