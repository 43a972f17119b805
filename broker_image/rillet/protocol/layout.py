"""The wire layout of kio entities, walked before kio's native reader sees the bytes.

Two jobs need the same walk over a message:

- Bounds. kio 0.6.5's native reader allocates for an array from the count it reads, before it
  reads the elements: a 51-byte request claiming 13 billion elements made it ask for 110 GB,
  and a Rust allocation failure aborts the process (no Python handler can catch it). Kafka
  bounds every size by the bytes that remain; so does `Layout.check`, for every string, bytes,
  records and array field and every tag section, at any depth, before the native reader runs.
  An element takes at least its layout's minimum size, so a count is checked against that.
- Unknown tagged fields (KIP-482). The native reader raises KeyError on a tag its schema does
  not know, where KIP-482 says to skip it. `Layout.copy` re-encodes the message without them.

The codec (codec.py) keeps the native reader for every message and puts the check in front,
compiled per message type (bounds.py). The walk is stricter than the native reader where they
could differ: a known tagged field must end exactly where its declared length says (the native
reader reads it with its own reader and ignores the length), varints are at most five bytes
holding at most 32 bits, a negative length other than -1 (null) is refused, and so are struct
markers other than -1 and 1 and null arrays where the schema has none. So every message the check
accepts is laid out for the native reader as the check saw it.
"""
from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveTupleField,
                                    classify_field, get_field_tag, get_schema_field_type,
                                    is_optional)
from kio.serial.writers import write_unsigned_varint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

# Bytes each fixed-size Kafka type takes on the wire.
_FIXED_SIZES = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4,
    "timedelta_i32": 4, "int64": 8, "datetime_i64": 8, "timedelta_i64": 8, "float64": 8,
    "uuid": 16,
}


class Malformed(ValueError):
    """The message does not fit its schema: a length or count runs past the bytes that
    remain, or a prefix is invalid."""


def read_uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits (Kafka's: five bytes at most) and the position
    after it."""
    value = 0
    for shift in (0, 7, 14, 21, 28):
        if pos >= end:
            raise Malformed("message ends inside a varint")
        byte = buf[pos]
        pos += 1
        if shift == 28 and byte > 0x0F:
            raise Malformed("varint longer than 32 bits")
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise Malformed("varint longer than five bytes")  # unreachable: 5th byte is <= 0x0F


def _read_legacy_length(buf: Any, pos: int, end: int, wide: bool) -> tuple[int, int]:
    """An int16 (strings) or int32 (bytes, arrays) length, -1 (null) or more."""
    codec = _INT32 if wide else _INT16
    after = pos + codec.size
    if after > end:
        raise Malformed("message ends inside a length")
    (length,) = codec.unpack_from(buf, pos)
    if length < -1:
        raise Malformed(f"negative length {length}")
    return length, after


def _read_compact_length(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """A compact length (N+1, 0 for null), read as N (null as 0)."""
    n, pos = read_uvarint(buf, pos, end)
    return max(n - 1, 0), pos


def _read_count(buf: Any, pos: int, end: int, compact: bool, min_size: int,
                what: str, nullable: bool = True) -> tuple[int, int]:
    """An array's element count, refused unless the bytes left can hold that many elements
    of ``min_size`` bytes each: this is the check the native reader does not make. A null
    array where the schema has none is refused too (the native reader would hand the
    handler None), as Kafka's parser refuses it."""
    if compact:
        raw, pos = read_uvarint(buf, pos, end)
        null, count = raw == 0, raw - 1
    else:
        raw, pos = _read_legacy_length(buf, pos, end, wide=True)
        null, count = raw == -1, raw
    if null:
        if not nullable:
            raise Malformed(f"null array of {what} where the schema allows none")
        return 0, pos
    if count * min_size > end - pos:
        raise Malformed(f"array of {count} {what} in {end - pos} bytes")
    return count, pos


@dataclass(frozen=True, slots=True)
class Fixed:
    """A field of a fixed number of bytes."""
    size: int

    @property
    def min_size(self) -> int:
        return self.size

    def check(self, buf: Any, pos: int, end: int) -> int:
        pos += self.size
        if pos > end:
            raise Malformed("message ends inside a field")
        return pos


@dataclass(frozen=True, slots=True)
class Sized:
    """A string, bytes or records field: a length prefix and that many bytes."""
    compact: bool
    wide: bool  # legacy int32 length (bytes, records) rather than int16 (strings)

    @property
    def min_size(self) -> int:
        return 1 if self.compact else (4 if self.wide else 2)

    def check(self, buf: Any, pos: int, end: int) -> int:
        if self.compact:
            length, pos = _read_compact_length(buf, pos, end)
        else:
            length, pos = _read_legacy_length(buf, pos, end, self.wide)
        pos += max(length, 0)
        if pos > end:
            raise Malformed(f"field of {length} bytes runs past the message")
        return pos


@dataclass(frozen=True, slots=True)
class PrimitiveArray:
    """An array of fixed-size or size-prefixed primitives."""
    compact: bool
    item: Fixed | Sized
    nullable: bool

    @property
    def min_size(self) -> int:
        return 1 if self.compact else 4

    def check(self, buf: Any, pos: int, end: int) -> int:
        count, pos = _read_count(buf, pos, end, self.compact, self.item.min_size, "items",
                                 self.nullable)
        if isinstance(self.item, Fixed):
            return pos + count * self.item.size  # bounded by _read_count
        for _ in range(count):
            pos = self.item.check(buf, pos, end)
        return pos


@dataclass(frozen=True, slots=True)
class Struct:
    """A nested entity, possibly nullable (KIP-893)."""
    layout: Layout
    nullable: bool  # KIP-893: an int8 marker, -1 for null, precedes a nullable struct

    @property
    def min_size(self) -> int:
        return 1 if self.nullable else self.layout.min_size

    def check(self, buf: Any, pos: int, end: int) -> int:
        if self.nullable:
            if pos >= end:
                raise Malformed("message ends inside a struct marker")
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:  # -1: null
                return pos
            if marker != 1:  # the native reader reads a struct after any other marker
                raise Malformed(f"struct marker {marker} is neither -1 nor 1")
        return self.layout.check(buf, pos, end)

    def copy(self, buf: Any, pos: int, out: io.BytesIO) -> int:
        if self.nullable:
            out.write(buf[pos:pos + 1])
            pos += 1
            if buf[pos - 1] == 0xFF:
                return pos
        return self.layout.copy(buf, pos, out)


@dataclass(frozen=True, slots=True)
class StructArray:
    """An array of nested entities."""
    layout: Layout
    compact: bool
    nullable: bool

    @property
    def min_size(self) -> int:
        return 1 if self.compact else 4

    def check(self, buf: Any, pos: int, end: int) -> int:
        layout = self.layout
        count, pos = _read_count(buf, pos, end, self.compact, layout.min_size, "structs",
                                 self.nullable)
        if layout.fixed_size is not None:  # e.g. a legacy partition entry of ints only
            return pos + count * layout.fixed_size
        for _ in range(count):
            pos = layout.check(buf, pos, end)
        return pos

    def copy(self, buf: Any, pos: int, out: io.BytesIO) -> int:
        start = pos
        count, pos = _read_count(buf, pos, len(buf), self.compact, self.layout.min_size,
                                 "structs")
        out.write(buf[start:pos])
        for _ in range(count):
            pos = self.layout.copy(buf, pos, out)
        return pos


Step = Union[Fixed, Sized, PrimitiveArray, Struct, StructArray]


@dataclass(frozen=True, slots=True)
class Layout:
    """One entity's wire layout: its untagged fields in order (runs of fixed-size fields
    merged into one step) and, for flexible versions, the tags it knows."""
    name: str
    fields: tuple[Step, ...]
    tagged: dict[int, Step]
    flexible: bool
    min_size: int
    fixed_size: int | None  # every instance takes exactly this many bytes, if known

    def check(self, buf: Any, pos: int, end: int) -> int:
        """The position where the entity at ``pos`` ends; raises Malformed when any length
        in it (nested ones included) runs past ``end``."""
        if self.fixed_size is not None:
            pos += self.fixed_size
            if pos > end:
                raise Malformed(f"message ends inside {self.name}")
            return pos
        for step in self.fields:
            pos = step.check(buf, pos, end)
        if self.flexible:
            pos = self.check_tags(buf, pos, end)
        return pos

    def check_tags(self, buf: Any, pos: int, end: int) -> int:
        count, pos = read_uvarint(buf, pos, end)
        if count * 2 > end - pos:  # a tag and a length take at least a byte each
            raise Malformed(f"{count} tagged fields in {end - pos} bytes")
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            length, pos = read_uvarint(buf, pos, end)
            value_end = pos + length
            if value_end > end:
                raise Malformed(f"tagged field {tag} of {length} bytes runs past the message")
            step = self.tagged.get(tag)
            if step is not None and step.check(buf, pos, value_end) != value_end:
                raise Malformed(f"tagged field {tag} of {self.name} is not {length} bytes long")
            pos = value_end
        return pos

    def copy(self, buf: Any, pos: int, out: io.BytesIO) -> int:
        """Write the entity at ``pos`` (already checked) to ``out`` without the tagged fields
        it does not know, at any depth; the position where it ends in ``buf``."""
        for step in self.fields:
            if isinstance(step, (Struct, StructArray)):
                pos = step.copy(buf, pos, out)
            else:
                after = step.check(buf, pos, len(buf))
                out.write(buf[pos:after])
                pos = after
        if self.flexible:
            pos = self._copy_known_tags(buf, pos, out)
        return pos

    def _copy_known_tags(self, buf: Any, pos: int, out: io.BytesIO) -> int:
        count, pos = read_uvarint(buf, pos, len(buf))
        kept = io.BytesIO()
        kept_count = 0
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, len(buf))
            length, pos = read_uvarint(buf, pos, len(buf))
            end = pos + length
            step = self.tagged.get(tag)
            if step is not None:
                value = io.BytesIO()
                if isinstance(step, (Struct, StructArray)):  # may hold unknown tags too
                    step.copy(buf, pos, value)
                else:
                    value.write(buf[pos:end])
                write_unsigned_varint(kept, tag)
                write_unsigned_varint(kept, value.tell())
                kept.write(value.getbuffer())
                kept_count += 1
            pos = end
        write_unsigned_varint(out, kept_count)
        out.write(kept.getbuffer())
        return pos


@lru_cache(maxsize=None)
def layout_of(cls: type) -> Layout:
    """``cls``'s layout, built once. Raises TypeError for a field type it cannot size."""
    # kio's rule: a request header's client_id is a legacy string even in flexible headers.
    is_request_header = cls.__name__ == "RequestHeader"
    flexible = bool(cls.__flexible__)
    fields: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        compact = flexible and not (is_request_header and field.name == "client_id")
        step = _step(field, compact, tag is not None)
        if tag is not None:
            tagged[tag] = step
        elif fields and isinstance(step, Fixed) and isinstance(fields[-1], Fixed):
            fields[-1] = Fixed(fields[-1].size + step.size)
        else:
            fields.append(step)
    min_size = sum(step.min_size for step in fields) + (1 if flexible else 0)
    fixed = None
    if not flexible and all(isinstance(step, Fixed) for step in fields):
        fixed = min_size
    return Layout(cls.__qualname__, tuple(fields), tagged, flexible, min_size, fixed)


def _step(field: dataclasses.Field, compact: bool, is_tagged: bool) -> Step:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        # A tagged struct's presence is its tag; only untagged ones carry a null marker.
        return Struct(layout_of(kind.type_), nullable=not is_tagged and is_optional(field))
    if isinstance(kind, EntityTupleField):
        item = layout_of(kind.type_)
        if item.min_size == 0:
            # An array of them could claim any count in no bytes at all.
            raise TypeError(f"{item.name} takes no bytes on the wire, yet comes in arrays")
        return StructArray(item, compact, _nullable(field))
    item = _primitive(get_schema_field_type(field), compact)
    if isinstance(kind, PrimitiveTupleField):
        return PrimitiveArray(compact, item, _nullable(field))
    return item


def _nullable(field: dataclasses.Field) -> bool:
    """The field itself may be null (``X | None``), not merely its elements."""
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


def _primitive(kafka_type: str, compact: bool) -> Fixed | Sized:
    if kafka_type in _FIXED_SIZES:
        return Fixed(_FIXED_SIZES[kafka_type])
    if kafka_type == "string":
        return Sized(compact, wide=False)
    if kafka_type in ("bytes", "records"):
        return Sized(compact, wide=True)
    raise TypeError(f"no wire size known for Kafka type {kafka_type!r}")
