"""The fixed-schema field encoding of Kafka's internal records and of the embedded consumer
protocol: big-endian integers, strings sized by an int16, bytes sized by an int32, -1 for null.
(The request/response codec is kio's; these payloads are opaque bytes to it.)"""
from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class FieldWriter:
    """Appends big-endian fixed-width integers, int16-sized strings, int32-sized bytes."""

    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> "FieldWriter":
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> "FieldWriter":
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> "FieldWriter":
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> "FieldWriter":
        if v is None:
            return self.i16(-1)
        raw = v.encode("utf-8")
        self.i16(len(raw))
        self.out += raw
        return self

    def blob(self, v: bytes | None) -> "FieldWriter":
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.out += v
        return self

    def bytes(self) -> bytes:
        return bytes(self.out)


class FieldReader:
    """Reads what FieldWriter writes; struct.error when the data ends early."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return v

    def blob(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(v)
