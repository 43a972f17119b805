"""Entities encoded once, spliced as bytes into the arrays of many messages.

kio's writer is plain Python: at 5,000 partitions one all-topics Metadata answer took
~200 ms to build and encode on a loaded core, paid again by every client that polls. An
answer whose entries rarely change can keep each entry's encoded bytes (per version) and
have them written where kio would have written the entries: ``write_with_entries``.

kio stays the one definition of the layout. The message is encoded by kio with the array
empty; the fields before the array are encoded again with kio's own field writers to know
where the array starts, and its length prefix is kio's array writer's. What is spliced:
that prefix for the real count, the entries' bytes, then the rest of kio's encoding (the
fields after the array, and the tagged fields of a flexible version). The bytes are the ones
kio would write for the same entries: tests/unit/test_splice.py compares them.
"""
from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator, Sequence

from kio.serial import entity_writer
from kio.serial._introspect import EntityTupleField, classify_field, get_field_tag
from kio.serial._serialize import get_field_writer

_Writer = Callable[[Any, Any], None]


def encode_entity(entity: Any) -> bytes:
    """``entity``'s bytes, as kio writes it inside a message."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a response is written up to its spliced array: the fields before it, the array's
    prefix writer."""
    head: tuple[tuple[str, _Writer], ...]   # the fields before the array, in wire order
    array: _Writer                          # the array field's own writer (its prefix)
    entry_type: type


class _Count:
    """A sequence of ``n`` entries as far as kio's array writer asks (``len()``), with
    nothing to iterate: the writer writes the length prefix and no entry."""
    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Any]:
        return iter(())


@lru_cache(maxsize=None)
def _plan(cls: type, field: str) -> _Plan:
    flexible = cls.__flexible__
    head = []
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue   # tagged fields go after every other field (kio's write_entity)
        kind = classify_field(f)
        if f.name == field:
            if not isinstance(kind, EntityTupleField):
                raise TypeError(f"{cls.__qualname__}.{field} is not an array of entities")
            return _Plan(tuple(head), get_field_writer(f, flexible, False, False), kind.type_)
        head.append((f.name, get_field_writer(f, flexible, False, False)))
    raise TypeError(f"{cls.__qualname__} has no untagged field {field!r}")


def entry_type(cls: type, field: str) -> type:
    """The entity class of array field ``field`` of ``cls`` (the class of its entries)."""
    return _plan(cls, field).entry_type


def write_with_entries(buf: Any, entity: Any, field: str, entries: Sequence[bytes]) -> None:
    """Write ``entity`` as kio would with array ``field`` holding the entries ``entries``
    are the encodings of (each of ``entry_type(type(entity), field)`` at its version); the
    value ``entity`` has in ``field`` is ignored."""
    plan = _plan(type(entity), field)
    value = getattr(entity, field)
    if value is None or len(value):   # written empty, so that its place can be found
        entity = dataclasses.replace(entity, **{field: ()})
    empty = encode_entity(entity)
    head = io.BytesIO()
    for name, writer in plan.head:
        writer(head, getattr(entity, name))
    start = head.tell()
    plan.array(head, ())
    end = head.tell()
    if empty[:end] != head.getvalue():   # kio wrote the message another way than planned
        raise AssertionError(f"{type(entity).__qualname__}.{field}: kio's encoding does not "
                             f"start with the fields before it")
    prefix = io.BytesIO()
    plan.array(prefix, _Count(len(entries)))
    buf.write(empty[:start])
    buf.write(prefix.getvalue())
    for entry in entries:
        buf.write(entry)
    buf.write(empty[end:])


def encode_with_entries(entity: Any, field: str, entries: Sequence[bytes]) -> bytes:
    """``write_with_entries`` into bytes."""
    buf = io.BytesIO()
    write_with_entries(buf, entity, field, entries)
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class SplicedBody:
    """A response body whose array ``field`` goes out as already encoded ``entries``:
    ``entity`` is the rest of it (its value in ``field`` is ignored). codec.encode_response
    writes it with ``write_with_entries``."""
    entity: Any
    field: str
    entries: Sequence[bytes]

    def write(self, buf: Any) -> None:
        write_with_entries(buf, self.entity, self.field, self.entries)
