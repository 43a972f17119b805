"""kio glue: request header parsing, payload decoding, response encoding.

Plain functions, bytes in and bytes out, so dispatch can be tested without
sockets. Readers and writers are built once per (api key, version).
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from .bounds import compiled_check
from .file_records import SplicedBuffer, SplicedFrame
from .layout import Malformed, layout_of
from .produce_response import write_body as write_produce_body
from .splice import SplicedBody

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
_CORRELATION = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class FramingError(Exception):
    """The bytes cannot be a Kafka request; the connection must be closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The request header fields every handler may read."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_key_version(frame: bytes) -> tuple[int, int, int]:
    """api key, version and correlation id: the fixed prefix of every header version."""
    if len(frame) < 8:
        raise FramingError(f"request of {len(frame)} bytes is shorter than a header")
    return _CORRELATION.unpack_from(frame, 0)


@lru_cache(maxsize=None)
def request_schema(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@lru_cache(maxsize=None)
def response_schema(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


Reader = Callable[[Any, int], tuple[Any, int]]


@lru_cache(maxsize=None)
def _reader(cls: type) -> Reader:
    """kio's native reader of ``cls`` behind the bounds check, skipping unknown tags.

    Every header and body, request or response, is read here, so for all APIs at once no
    length on the wire makes the native reader allocate more than the frame holds (it
    aborts the process when an allocation fails), and unknown tagged fields (KIP-482), on
    which the native reader raises KeyError, are dropped and the rest read natively."""
    native = entity_reader(cls)
    check = compiled_check(cls)
    layout = layout_of(cls)

    def read(data: Any, offset: int) -> tuple[Any, int]:
        end = check(data, offset, len(data))
        try:
            entity, used = native(data, offset)
        except KeyError:  # kio: "Unknown tagged field tag: N"
            out = io.BytesIO()
            layout.copy(data, offset, out)
            return native(out.getvalue(), 0)[0], end - offset
        if used != end - offset:  # kio read other bytes than were checked: never trust it
            raise Malformed(f"{cls.__qualname__}: kio read {used} bytes, the check "
                            f"{end - offset}")
        return entity, used

    return read


@lru_cache(maxsize=None)
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def decode_request(frame: bytes) -> tuple[RequestHeader, Any]:
    """Parse header and body of a supported (api key, version); raises FramingError."""
    api_key, version, _ = peek_key_version(frame)
    try:
        schema = request_schema(api_key, version)
    except Exception as exc:  # kio: unknown key or version
        raise FramingError(f"no schema for api key {api_key} v{version}") from exc
    header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    header, body = _read_message(header_cls, schema, frame, "request")
    # Trailing bytes are tolerated, as Kafka's own parser does: some clients
    # (librdkafka's Metadata v12) send fields newer than the version they name.
    return RequestHeader(api_key, version, header.correlation_id, header.client_id), body


def decode_header_only(frame: bytes) -> RequestHeader:
    """Header of a request whose body we will not parse (unsupported version)."""
    api_key, version, correlation_id = peek_key_version(frame)
    return RequestHeader(api_key, version, correlation_id, None)


def _write_header(buf: Any, api_key: int, correlation_id: int, body: Any) -> None:
    """The response header: v1 for a flexible body, v0 otherwise and always for ApiVersions."""
    if isinstance(body, SplicedBody):
        body = body.entity
    if type(body).__flexible__ and api_key != API_VERSIONS_KEY:
        _writer(ResponseHeaderV1)(buf, ResponseHeaderV1(correlation_id=correlation_id))
    else:
        _writer(ResponseHeaderV0)(buf, ResponseHeaderV0(correlation_id=correlation_id))


def encode_response(api_key: int, correlation_id: int, body: Any) -> bytes:
    """Size-prefixed response frame. ApiVersions always answers with header v0. ``body``
    is a response entity, or a SplicedBody (an array of it already encoded)."""
    if api_key == PRODUCE_KEY and not isinstance(body, SplicedBody):
        fast = _produce_frame(correlation_id, body)
        if fast is not None:
            return fast
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _write_header(buf, api_key, correlation_id, body)
    if isinstance(body, SplicedBody):
        body.write(buf)
    else:
        _writer(type(body))(buf, body)
    return _framed(buf)


def _produce_frame(correlation_id: int, body: Any) -> bytes | None:
    """A Produce response frame by the struct writer (the hot path: one per produce
    request), None when the body holds something it leaves to kio."""
    out = bytearray(_SIZE.size)
    out += _SIZE.pack(correlation_id)
    if type(body).__flexible__:
        out.append(0)   # response header v1: no tagged fields
    if not write_produce_body(out, body):
        return None
    _SIZE.pack_into(out, 0, len(out) - _SIZE.size)
    return bytes(out)


def encode_spliced_response(api_key: int, correlation_id: int, body: Any) -> SplicedFrame:
    """``encode_response`` of a body whose records fields may hold FileRecords: the same
    bytes, with those records left in their files (protocol/file_records.py). The frame owns
    the FileRecords written into it; if encoding fails, they are closed here."""
    buf = SplicedBuffer()
    try:
        _write_header(buf, api_key, correlation_id, body)
        _writer(type(body))(buf, body)
    except BaseException:
        buf.close()
        raise
    return buf.frame()


def encode_request(api_key: int, version: int, correlation_id: int,
                   client_id: str | None, body: Any) -> bytes:
    """Size-prefixed request frame (used by rillet's own client)."""
    schema = request_schema(api_key, version)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    if schema.__flexible__:
        header: Any = RequestHeaderV2(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id=client_id)
        _writer(RequestHeaderV2)(buf, header)
    else:
        header = RequestHeaderV1(request_api_key=api_key, request_api_version=version,
                                 correlation_id=correlation_id, client_id=client_id)
        _writer(RequestHeaderV1)(buf, header)
    _writer(schema)(buf, body)
    return _framed(buf)


def _framed(buf: io.BytesIO) -> bytes:
    """Fill in the size prefix reserved at the start of ``buf``, and return its bytes.

    getvalue() hands over BytesIO's own bytes when no view of it is alive, so a
    multi-megabyte fetch response is not copied once more here.
    """
    size = buf.tell() - 4
    buf.seek(0)
    buf.write(_SIZE.pack(size))
    return buf.getvalue()


def response_size(head: bytes) -> int:
    """The int32 size prefix of a response; FramingError unless the frame can hold the
    correlation id every response starts with (a negative size is a peer's garbage)."""
    (size,) = _SIZE.unpack(head)
    if size < 4:
        raise FramingError(f"response of {size} bytes cannot hold a correlation id")
    return size


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix; raises
    FramingError when the frame does not fit the schema."""
    schema = response_schema(api_key, version)
    flexible = schema.__flexible__ and api_key != API_VERSIONS_KEY
    header_cls = ResponseHeaderV1 if flexible else ResponseHeaderV0
    header, body = _read_message(header_cls, schema, frame, "response")
    return header.correlation_id, body


def _read_message(header_cls: type, schema: type, frame: bytes, kind: str) -> tuple[Any, Any]:
    """Header and body of a request or response frame; FramingError when it does not fit."""
    try:
        header, used = _reader(header_cls)(frame, 0)
        body, _ = _reader(schema)(frame, used)
    except Exception as exc:
        raise FramingError(f"malformed api key {schema.__api_key__} v{schema.__version__} "
                           f"{kind}: {exc!r}") from exc
    return header, body
