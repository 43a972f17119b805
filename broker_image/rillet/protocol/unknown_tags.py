"""Unknown tagged fields (KIP-482) are skipped, in requests, responses and headers alike.

A flexible message may carry tagged fields its receiver's schema does not know; KIP-482 says
they are ignored, and newer clients do send them. kio 0.6.5's native reader raises KeyError on
such a tag instead, which would cut the client off. `tolerant_reader` keeps the native reader
for every message it can read (the hot path stays native) and, only when it meets an unknown
tag, copies the entity without the unknown tagged fields and has the native reader decode that
copy, so both paths build entities the same way.

The walk follows kio's own field classification (private helpers of the pinned kio 0.6.5): the
size of every primitive comes from kio's field reader, so only the layout of structs, arrays and
tag sections is spelled out here.
"""
from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Union

from kio.serial import entity_reader
from kio.serial._introspect import (EntityField, EntityTupleField, classify_field,
                                    get_field_tag, is_optional)
from kio.serial._parse import get_field_reader
from kio.serial.readers import (read_compact_array_length, read_int8,
                                read_legacy_array_length, read_unsigned_varint)
from kio.serial.writers import write_unsigned_varint

Reader = Callable[[Any, int], tuple[Any, int]]


def tolerant_reader(cls: type) -> Reader:
    """A reader of ``cls`` entities, (buffer, offset) -> (entity, bytes used), as kio's,
    that skips unknown tagged fields instead of failing on them."""
    native = entity_reader(cls)

    def read(data: Any, offset: int) -> tuple[Any, int]:
        try:
            return native(data, offset)
        except KeyError:  # kio: "Unknown tagged field tag: N"
            cleaned, used = without_unknown_tags(cls, data, offset)
            return native(cleaned, 0)[0], used

    return read


def without_unknown_tags(cls: type, data: Any, offset: int) -> tuple[bytes, int]:
    """The ``cls`` entity at ``offset`` re-encoded without its unknown tagged fields (nested
    ones included), and how many bytes the original took. Raises ValueError when the bytes
    run out before the entity ends."""
    buf = memoryview(data)
    out = io.BytesIO()
    end = _copy_entity(cls, buf, offset, out)
    return out.getvalue(), end - offset


@dataclass(frozen=True)
class _Primitive:
    read: Reader  # kio's reader of this field; only the size it reports is used

    def copy(self, buf: memoryview, pos: int, out: io.BytesIO) -> int:
        _, size = self.read(buf, pos)
        return _take(buf, pos, size, out)


@dataclass(frozen=True)
class _Struct:
    cls: type
    nullable: bool  # KIP-893: an int8 marker, -1 for null, precedes a nullable struct

    def copy(self, buf: memoryview, pos: int, out: io.BytesIO) -> int:
        if self.nullable:
            marker, size = read_int8(buf, pos)
            pos = _take(buf, pos, size, out)
            if marker < 0:
                return pos
        return _copy_entity(self.cls, buf, pos, out)


@dataclass(frozen=True)
class _StructArray:
    cls: type
    compact: bool

    def copy(self, buf: memoryview, pos: int, out: io.BytesIO) -> int:
        read_length = read_compact_array_length if self.compact else read_legacy_array_length
        count, size = read_length(buf, pos)
        pos = _take(buf, pos, size, out)
        count = max(count or 0, 0)  # null arrays: None (compact) or -1 (legacy)
        if count > len(buf) - pos:  # every struct takes at least one byte
            raise ValueError(f"array of {count} structs in {len(buf) - pos} bytes")
        for _ in range(count):
            pos = _copy_entity(self.cls, buf, pos, out)
        return pos


_Step = Union[_Primitive, _Struct, _StructArray]


@dataclass(frozen=True)
class _Layout:
    fields: tuple[_Step, ...]   # the untagged fields, in wire order
    tagged: dict[int, _Step]    # the tags the schema knows
    flexible: bool


@lru_cache(maxsize=None)
def _layout(cls: type) -> _Layout:
    is_request_header = cls.__name__ == "RequestHeader"  # kio's rule for client_id
    fields: list[_Step] = []
    tagged: dict[int, _Step] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        step = _step(cls, field, is_request_header, tag is not None)
        if tag is None:
            fields.append(step)
        else:
            tagged[tag] = step
    return _Layout(tuple(fields), tagged, cls.__flexible__)


def _step(cls: type, field: dataclasses.Field, is_request_header: bool,
          is_tagged: bool) -> _Step:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        # A tagged struct's presence is its tag; only untagged ones carry a null marker.
        return _Struct(kind.type_, nullable=not is_tagged and is_optional(field))
    if isinstance(kind, EntityTupleField):
        return _StructArray(kind.type_, compact=cls.__flexible__)
    return _Primitive(get_field_reader(cls, field, is_request_header, is_tagged))


def _copy_entity(cls: type, buf: memoryview, pos: int, out: io.BytesIO) -> int:
    layout = _layout(cls)
    for step in layout.fields:
        pos = step.copy(buf, pos, out)
    if layout.flexible:
        pos = _copy_known_tags(layout, buf, pos, out)
    return pos


def _copy_known_tags(layout: _Layout, buf: memoryview, pos: int, out: io.BytesIO) -> int:
    count, size = read_unsigned_varint(buf, pos)
    pos += size
    if count > len(buf) - pos:  # every tagged field takes at least two bytes
        raise ValueError(f"{count} tagged fields in {len(buf) - pos} bytes")
    kept = io.BytesIO()
    kept_count = 0
    for _ in range(count):
        tag, size = read_unsigned_varint(buf, pos)
        pos += size
        length, size = read_unsigned_varint(buf, pos)
        pos += size
        end = pos + length
        if end > len(buf):
            raise ValueError(f"tagged field {tag} of {length} bytes runs past the message")
        step = layout.tagged.get(tag)
        if step is not None:
            value = io.BytesIO()
            if isinstance(step, _Primitive):
                value.write(buf[pos:end])
            else:  # a struct may hold unknown tags of its own
                step.copy(buf[:end], pos, value)
            write_unsigned_varint(kept, tag)
            write_unsigned_varint(kept, value.tell())
            kept.write(value.getbuffer())
            kept_count += 1
        pos = end
    write_unsigned_varint(out, kept_count)
    out.write(kept.getbuffer())
    return pos


def _take(buf: memoryview, pos: int, size: int, out: io.BytesIO) -> int:
    """Copy ``size`` bytes at ``pos`` to ``out``; the position after them."""
    if pos + size > len(buf):
        raise ValueError("message ends inside a field")
    out.write(buf[pos:pos + size])
    return pos + size
