"""ProduceResponse (v3-11) bodies built and written without the generic machinery.

Every produce request is answered with one, so both steps are on the hottest path: the
generic ``build`` (typed conversion of every field through per-field plans) and kio's writer
(the schema walked field by field through typed wrappers) together cost about as much CPU
as the append itself. Here they cover what a produce answer carries in the usual case: the
plain values produce.py puts in its dicts, no record errors, no current leader and no node
endpoints (KIP-951: only on NOT_LEADER_OR_FOLLOWER). Anything else falls back to ``build``
and kio, so a rare shape never needs a second hand-written encoder.
tests/unit/test_produce_response.py checks both against the generic path for every version.
"""
from __future__ import annotations

import dataclasses
import datetime
import struct
import sys
from functools import lru_cache
from typing import Any

from kio.schema.errors import ErrorCode

from .build import build

_FLEXIBLE_SINCE = 9
_LOG_START_SINCE = 5
_RECORD_ERRORS_SINCE = 8
_LEGACY_STRING_MAX = 0x7FFF
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION_HEAD = struct.Struct(">ihqq")   # index, error code, base offset, log append time
_I64 = struct.Struct(">q")
_NO_TAGS = b"\0"
# The partition keys build_body fills as ``build`` would; a dict with any other key (a
# current leader, record errors) is built by ``build`` itself.
_PARTITION_KEYS = frozenset({"index", "error_code", "base_offset", "log_append_time",
                             "log_start_offset", "error_message"})
_PARTITION_NEEDS = frozenset({"index", "error_code", "base_offset"})
_TOPIC_KEYS = frozenset({"name", "partition_responses"})


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """The entity classes of one ProduceResponse version and the fields it has."""
    topic: type
    partition: type
    log_start: bool      # v5+
    record_errors: bool  # v8+: record_errors (no default) and error_message


@lru_cache(maxsize=None)
def _shape(schema: type) -> _Shape:
    module = sys.modules[schema.__module__]
    partition = module.PartitionProduceResponse
    names = {f.name for f in dataclasses.fields(partition)}
    return _Shape(module.TopicProduceResponse, partition, "log_start_offset" in names,
                  "record_errors" in names)


def _datetime(millis: int | None) -> datetime.datetime | None:
    """As ``build`` converts a timestamp: a negative one (no LogAppendTime) is None."""
    if millis is None or millis < 0:
        return None
    return datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.timezone.utc)


# Enum lookups by value are slow next to a dict's; the codes seen are few.
_ERROR_CODES: dict[int, ErrorCode] = {}


def _error_code(code: int) -> ErrorCode:
    known = _ERROR_CODES.get(code)
    if known is None:
        known = _ERROR_CODES[code] = ErrorCode(code)   # an unknown code raises, as in build
    return known


def _partition_entity(shape: _Shape, p: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {"index": p["index"], "error_code": _error_code(p["error_code"]),
                              "base_offset": p["base_offset"],
                              "log_append_time": _datetime(p.get("log_append_time"))}
    if shape.log_start and "log_start_offset" in p:
        kwargs["log_start_offset"] = p["log_start_offset"]
    if shape.record_errors:
        kwargs["record_errors"] = ()
        if "error_message" in p:
            kwargs["error_message"] = p["error_message"]
    return shape.partition(**kwargs)


def _plain(topic: dict[str, Any]) -> bool:
    """The topic's dict holds only the keys and types build_body fills as ``build`` does."""
    return topic.keys() == _TOPIC_KEYS and all(
        _PARTITION_NEEDS <= p.keys() <= _PARTITION_KEYS and type(p["error_code"]) is int
        for p in topic["partition_responses"])


def build_body(schema: type, responses: list[dict[str, Any]], throttle_ms: int) -> Any:
    """``build(schema, {"responses": responses, "throttle_time": throttle_ms})`` for the
    plain dicts produce.py makes (index, error code and offsets as ints), the same entity
    at a quarter of the cost; other dicts go to ``build``."""
    shape = _shape(schema)
    topics = []
    for topic in responses:
        if not _plain(topic):
            return build(schema, {"responses": responses, "throttle_time": throttle_ms})
        parts = topic["partition_responses"]
        topics.append(shape.topic(
            name=topic["name"],
            partition_responses=tuple(_partition_entity(shape, p) for p in parts)))
    return schema(responses=tuple(topics),
                  throttle_time=datetime.timedelta(milliseconds=throttle_ms))


def _uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _string(out: bytearray, value: str | None, flexible: bool) -> bool:
    """Write a (nullable) string; False when kio would refuse it (over int16 length)."""
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return True
    raw = value.encode()
    if flexible:
        _uvarint(out, len(raw) + 1)
    elif len(raw) > _LEGACY_STRING_MAX:
        return False
    else:
        out += _I16.pack(len(raw))
    out += raw
    return True


def _array_length(out: bytearray, length: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, length + 1)
    else:
        out += _I32.pack(length)


def _millis(value: Any) -> int:
    """A datetime as kio writes it: -1 for None, else rounded epoch milliseconds."""
    return -1 if value is None else round(value.timestamp() * 1000)


def _partition(out: bytearray, p: Any, version: int, flexible: bool) -> bool:
    out += _PARTITION_HEAD.pack(p.index, p.error_code.value, p.base_offset,
                                _millis(p.log_append_time))
    if version >= _LOG_START_SINCE:
        out += _I64.pack(p.log_start_offset)
    if version >= _RECORD_ERRORS_SINCE:
        if p.record_errors:
            return False
        _array_length(out, 0, flexible)
        if not _string(out, p.error_message, flexible):
            return False
    if flexible:
        leader = getattr(p, "current_leader", None)
        if leader is not None and (leader.leader_id != -1 or leader.leader_epoch != -1):
            return False
        out += _NO_TAGS
    return True


def write_body(out: bytearray, body: Any) -> bool:
    """Append ``body`` (a kio ProduceResponse v3-11) to ``out`` as kio would; False (``out``
    then holds a partial write) when it carries a field this writer leaves to kio."""
    version = body.__version__
    flexible = version >= _FLEXIBLE_SINCE
    if getattr(body, "node_endpoints", ()):
        return False
    _array_length(out, len(body.responses), flexible)
    for topic in body.responses:
        if not _string(out, topic.name, flexible):
            return False
        _array_length(out, len(topic.partition_responses), flexible)
        for p in topic.partition_responses:
            if not _partition(out, p, version, flexible):
                return False
        if flexible:
            out += _NO_TAGS
    out += _I32.pack(round(body.throttle_time.total_seconds() * 1000))
    if flexible:
        out += _NO_TAGS
    return True
