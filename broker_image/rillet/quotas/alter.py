"""AlterClientQuotas decided: entries in, metadata records and each entry's outcome out.

Pure: the active controller commits the records under its lock (controller.py), as Kafka's
ClientQuotaControlManager does. An entry is all or nothing: an invalid entity, an unknown
key, a bad value or a key named twice refuses the whole entry with INVALID_REQUEST and
leaves the other entries alone. Removing a key that is not set is not an error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..metadata import records as mrec
from ..metadata.image import MetadataImage
from ..protocol import errors
from .entity import Entity, validate_entity, validate_value


@dataclass(frozen=True)
class QuotaOp:
    """Set (or remove) one quota key of an entity."""
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True)
class QuotaEntry:
    """One entity of an AlterClientQuotas request and its operations."""
    components: tuple[tuple[str, str | None], ...]   # as the request lists them
    ops: tuple[QuotaOp, ...]


def _entry_records(image: MetadataImage, entry: QuotaEntry) -> list[dict[str, Any]]:
    """The records of one valid entry; raises InvalidRequest for an invalid one."""
    entity: Entity = validate_entity(list(entry.components))
    keys = [op.key for op in entry.ops]
    if len(set(keys)) != len(keys):
        raise errors.InvalidRequest(f"a quota key is named twice in {keys}")
    current = image.client_quotas.get(entity, {})
    records = []
    for op in entry.ops:
        if op.remove:
            if op.key not in current:
                validate_key_only(op.key)
                continue
            records.append(mrec.client_quota_record(entity, op.key, None))
        else:
            validate_value(op.key, op.value)
            if current.get(op.key) != op.value:
                records.append(mrec.client_quota_record(entity, op.key, float(op.value)))
    return records


def validate_key_only(key: str) -> None:
    """An unknown key is refused even when only removed (Kafka checks keys first)."""
    validate_value(key, 1.0)


def quota_changes(image: MetadataImage, entries: list[QuotaEntry]
                  ) -> tuple[list[dict[str, Any]], list[errors.KafkaError | None]]:
    """Records for the valid entries, and each entry's error (None: applied)."""
    records: list[dict[str, Any]] = []
    outcome: list[errors.KafkaError | None] = []
    for entry in entries:
        try:
            records += _entry_records(image, entry)
            outcome.append(None)
        except errors.KafkaError as exc:
            outcome.append(exc)
    return records, outcome
