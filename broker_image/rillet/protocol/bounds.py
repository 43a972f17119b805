"""The bounds check of a message type, compiled once into straight-line Python.

`Layout.check` (layout.py) walks a message step by step, one method call per field; fine as
a reference, but five to ten times the native decode it guards. Here each request and
response type gets its own function, generated from its layout, with nested structs inlined,
runs of fixed-size fields added up, the one-byte varints that nearly every length is read
inline, and an empty tag section a single comparison. It refuses exactly what `Layout.check`
refuses (tests/unit/test_bounds.py compares the two on valid and damaged messages); a tag
section that is not empty goes to `Layout.check_tags`, which is rare enough not to matter.

Checks of the position against the end are made before each byte read and once at the end,
not after every field: nothing is allocated while walking, so a position past the end only
has to be caught before it is read from or returned.

Bytes alone do not bound the cost of a message: an element can take a single byte on the wire
(an empty compact string takes two) and tens of bytes decoded, and every element a handler
answers costs it time on the event loop. An 8 MB Metadata request of 4 million empty names,
well under socket.request.max.bytes, grew a broker by 1.7 GB and held its loop for minutes.
So the check also counts the elements of every array at any depth, and refuses a message
past a budget (MAX_REQUEST_ELEMENTS, MAX_RESPONSE_ELEMENTS) as it walks: far above what any
client sends for the partitions a node can carry (a Fetch or Produce of 10,000 partitions
is about 10,000 elements; a Metadata answer for 10,000 partitions at RF 3 about 70,000), far
below what would stall the node. Tagged fields are bounded by their declared lengths alone.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Callable, NoReturn

from .layout import (Fixed, Layout, Malformed, PrimitiveArray, Sized, Step, Struct, StructArray,
                     layout_of, read_uvarint)

Check = Callable[[Any, int, int], int]

# Array elements (at any depth, primitive ones included) one message may hold.
MAX_REQUEST_ELEMENTS = 250_000
MAX_RESPONSE_ELEMENTS = 2_000_000


def _short() -> NoReturn:
    raise Malformed("message ends inside a field")


def _too_many(count: int, left: int) -> NoReturn:
    raise Malformed(f"array of {count} elements in {left} bytes")


def _negative(length: int) -> NoReturn:
    raise Malformed(f"negative length {length}")


def _null_array() -> NoReturn:
    raise Malformed("null array where the schema allows none")


def _bad_marker(marker: int) -> NoReturn:
    raise Malformed(f"struct marker {marker} is neither -1 nor 1")


def _over_budget(limit: int) -> NoReturn:
    raise Malformed(f"more than {limit:,} array elements in one message")


_HELPERS = {"_short": _short, "_too_many": _too_many, "_negative": _negative,
            "_null_array": _null_array, "_bad_marker": _bad_marker,
            "_over_budget": _over_budget, "uvarint": read_uvarint,
            "i16": struct.Struct(">h").unpack_from, "i32": struct.Struct(">i").unpack_from}


@lru_cache(maxsize=None)
def compiled_check(cls: type) -> Check:
    """(buffer, offset, end) -> where the ``cls`` message at offset ends; raises Malformed
    as `layout_of(cls).check` does."""
    emitter = _Emitter(element_budget(cls))
    emitter.layout(layout_of(cls), 1)
    source = "\n".join(["def check(buf, pos, end):", "    elements = 0", *emitter.lines,
                        "    if pos > end: _short()", "    return pos"])
    namespace = dict(_HELPERS, **emitter.tag_checks)
    exec(compile(source, f"<bounds of {cls.__qualname__}>", "exec"), namespace)
    return namespace["check"]


def element_budget(cls: type) -> int:
    """How many array elements a message of type ``cls`` may hold."""
    kind = getattr(getattr(cls, "__type__", None), "name", "")
    return MAX_RESPONSE_ELEMENTS if kind == "response" else MAX_REQUEST_ELEMENTS


class _Emitter:
    """Python source lines for a layout, one method per kind of step."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.lines: list[str] = []
        self.tag_checks: dict[str, Callable[[Any, int, int], int]] = {}

    def emit(self, indent: int, *lines: str) -> None:
        self.lines += ["    " * indent + line for line in lines]

    def layout(self, layout: Layout, indent: int) -> None:
        if layout.fixed_size is not None:
            self.emit(indent, f"pos += {layout.fixed_size}")
            return
        for step in layout.fields:
            self.step(step, indent)
        if layout.flexible:
            name = f"tags_{len(self.tag_checks)}"
            self.tag_checks[name] = layout.check_tags
            self.emit(indent, "if pos >= end: _short()",
                      "if buf[pos] == 0: pos += 1",
                      f"else: pos = {name}(buf, pos, end)")

    def step(self, step: Step, indent: int) -> None:
        if isinstance(step, Fixed):
            self.emit(indent, f"pos += {step.size}")
        elif isinstance(step, Sized):
            self.sized(step, indent)
        elif isinstance(step, PrimitiveArray):
            self.count(step.compact, step.nullable, step.item.min_size, indent)
            if isinstance(step.item, Fixed):
                self.emit(indent, f"pos += n * {step.item.size}")
            else:
                self.emit(indent, "for _ in range(n):")
                self.sized(step.item, indent + 1)
        elif isinstance(step, StructArray):
            self.count(step.compact, step.nullable, step.layout.min_size, indent)
            if step.layout.fixed_size is not None:
                self.emit(indent, f"pos += n * {step.layout.fixed_size}")
            else:
                self.emit(indent, "for _ in range(n):")
                self.layout(step.layout, indent + 1)
        elif isinstance(step, Struct):
            if step.nullable:
                self.emit(indent, "if pos >= end: _short()", "m = buf[pos]", "pos += 1",
                          "if m == 1:")
                self.layout(step.layout, indent + 1)
                self.emit(indent, "elif m != 0xFF: _bad_marker(m)")
            else:
                self.layout(step.layout, indent)
        else:
            raise TypeError(f"no bounds for {step!r}")

    def varint(self, indent: int) -> None:
        """n = the unsigned varint at pos; pos after it."""
        self.emit(indent, "if pos >= end: _short()", "n = buf[pos]",
                  "if n < 0x80: pos += 1", "else: n, pos = uvarint(buf, pos, end)")

    def sized(self, step: Sized, indent: int) -> None:
        if step.compact:
            self.varint(indent)
            self.emit(indent, "if n: pos += n - 1")
            return
        width, read = (4, "i32") if step.wide else (2, "i16")
        self.emit(indent, f"if pos + {width} > end: _short()", f"n = {read}(buf, pos)[0]",
                  f"pos += {width}", "if n > 0: pos += n", "elif n < -1: _negative(n)")

    def count(self, compact: bool, nullable: bool, min_size: int, indent: int) -> None:
        """n = an array's element count (0 for null), refused unless the bytes left hold n
        elements of ``min_size`` bytes."""
        if compact:
            self.varint(indent)
            null, value = "n == 0", "n - 1"
        else:
            self.emit(indent, "if pos + 4 > end: _short()", "n = i32(buf, pos)[0]",
                      "pos += 4", "if n < -1: _negative(n)")
            null, value = "n == -1", "n"
        self.emit(indent, f"if {null}:", "    " + ("n = 0" if nullable else "_null_array()"),
                  f"else: n = {value}",
                  f"if n * {min_size} > end - pos: _too_many(n, end - pos)",
                  "elements += n",
                  f"if elements > {self.budget}: _over_budget({self.budget})")
