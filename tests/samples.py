"""Plain-value samples of any kio entity, for tests that encode every API and version."""
from __future__ import annotations

import dataclasses
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveTupleField,
                                    classify_field)

_BY_TYPE = {"string": "x", "bytes": b"", "records": b"", "bool": True, "float64": 0.5,
            "uuid": "00000000-0000-0000-0000-000000000001"}
# Non-empty variable-length values, so a walk that mis-sizes one is caught.
_RICH_BY_TYPE = {**_BY_TYPE, "string": "name-ä", "bytes": b"\x00\x01\x02",
                 "records": b"\xff" * 70}


def sample(cls: type, *, tagged: bool = False, items: int = 1) -> dict[str, Any]:
    """Values for every untagged field of ``cls`` (and its tagged ones when ``tagged``),
    ``items`` elements in every array; with ``tagged`` the strings and bytes are non-empty."""
    by_type = _RICH_BY_TYPE if tagged else _BY_TYPE
    data: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata and not tagged:
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            data[f.name] = sample(kind.type_, tagged=tagged, items=items)
        elif isinstance(kind, EntityTupleField):
            data[f.name] = [sample(kind.type_, tagged=tagged, items=items)
                            for _ in range(items)]
        else:
            value = by_type.get(f.metadata["kafka_type"], 1)
            data[f.name] = [value] * items if isinstance(kind, PrimitiveTupleField) else value
    return data


def all_kio_schemas() -> list[type]:
    """Every request and response of every API and version kio 0.6.5 knows."""
    out = []
    for key in sorted(api_key_map):
        for load in (load_request_schema, load_response_schema):
            for version in range(0, 40):
                try:
                    out.append(load(key, version))
                except Exception:  # kio: no such version
                    continue
    return out
