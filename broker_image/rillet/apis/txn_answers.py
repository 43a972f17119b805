"""What the transactional APIs share in their answers (not an API: registers nothing).

PRODUCER_FENCED (KIP-588) reaches only clients whose request version knows it; older
versions get INVALID_PRODUCER_EPOCH, as Kafka answers them.
"""
from __future__ import annotations

import datetime
from typing import Any

from ..protocol import errors


def txn_error_code(exc: BaseException, action: str, version: int, fenced_since: int) -> int:
    """The code answering ``exc`` at ``version`` of an API that knows PRODUCER_FENCED from
    ``fenced_since`` on."""
    code = errors.code_of(exc, action)
    if code == errors.ProducerFenced.code and version < fenced_since:
        return errors.InvalidProducerEpoch.code
    return code


def millis(value: Any) -> int:
    """A duration field kio decodes to a timedelta, in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
