"""Build kio entities of any version from plain Python values.

Handlers describe a response once as nested dicts; `build(cls, data)` fits it
to the exact dataclasses of the request's version: keys a version lacks are
dropped, fields it has but the dict omits take their schema default, ints
become timedeltas / datetimes / error codes where the schema says so.
"""
from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from functools import lru_cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta

_NONE = type(None)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    """How one field of an entity is filled from a plain value (built once per entity type)."""
    name: str
    convert: Any  # callable(value) -> value
    has_default: bool
    implicit: Any  # converted value used when the caller omits a field without default


def _identity(value: Any) -> Any:
    return value


def _to_timedelta(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _to_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if int(value) < 0:
        return None
    return datetime.datetime.fromtimestamp(int(value) / 1000, tz=datetime.timezone.utc)


def _to_error(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


def _to_uuid(value: Any) -> Any:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(str(value))


def _converter(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not _NONE]
        inner = _converter(args[0]) if len(args) == 1 else _identity
        return lambda v: None if v is None else inner(v)
    if origin is tuple:
        item = _converter(typing.get_args(hint)[0])
        if item is _identity:
            return lambda v: tuple(v)
        return lambda v: tuple(item(x) for x in v)
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint):
            return lambda v: v if isinstance(v, hint) else build(hint, v)
        if issubclass(hint, (i32Timedelta, i64Timedelta)):
            return _to_timedelta
        if issubclass(hint, TZAware):
            return _to_datetime
        if issubclass(hint, ErrorCode):
            return _to_error
        if issubclass(hint, uuid.UUID):
            return _to_uuid
    return _identity


@lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        has_default = (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)
        convert = _converter(hints[f.name])
        implicit = None if has_default else convert(_implicit_default(hints[f.name], f.name))
        plans.append(_FieldPlan(f.name, convert, has_default, implicit))
    return tuple(plans)


_ZERO_BY_HINT = {"error_code": 0, "throttle_time": 0}


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for plan in _plan(cls):
        if plan.name in data:
            kwargs[plan.name] = plan.convert(data[plan.name])
        elif not plan.has_default:
            kwargs[plan.name] = plan.implicit
    return cls(**kwargs)


def _implicit_default(hint: Any, name: str) -> Any:
    """Default for a field without a schema default: what Kafka's own generated code uses."""
    if name in _ZERO_BY_HINT:
        return _ZERO_BY_HINT[name]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return None
    if origin is tuple:
        return ()
    if hint is bool:
        return False
    if hint is str:
        return ""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return {}
    if isinstance(hint, type) and issubclass(hint, (bytes,)):
        return b""
    return 0
